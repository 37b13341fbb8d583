/** Reads the NUL-terminated string a native call wrote into `buf`. */
export function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return new TextDecoder().decode(end < 0 ? buf : buf.subarray(0, end));
}

/** A NUL-terminated copy of `s` for passing to native code. */
export function toCString(s: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}
