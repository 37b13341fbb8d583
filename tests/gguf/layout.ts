/**
 * Lists every field of a (valid) GGUF header with its offset and kind, independently of
 * the reader, so the fuzzer can cut and corrupt the header exactly at field boundaries.
 */

export type FieldKind =
  | "magic"
  | "version"
  | "tensor_count"
  | "kv_count"
  | "string_length"
  | "string_bytes"
  | "value_type"
  | "scalar"
  | "array_type"
  | "array_length"
  | "n_dims"
  | "dim"
  | "tensor_type"
  | "tensor_offset";

export interface Field {
  kind: FieldKind;
  offset: number;
  size: number;
  /** The key or tensor name the field belongs to; "key" / "tensor" for the names themselves. */
  owner: string;
}

const SCALAR_SIZE = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const STRING = 8;
const ARRAY = 9;

/**
 * The header's fields in file order, and where the header ends (before padding). Of each
 * array only the fields of the first and last `keepPerArray` elements are listed.
 */
export function headerFields(
  bytes: Uint8Array,
  keepPerArray = Infinity,
): { fields: Field[]; end: number } {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fields: Field[] = [];
  let pos = 0;
  let listing = true;
  const field = (kind: FieldKind, size: number, owner: string) => {
    if (listing) fields.push({ kind, offset: pos, size, owner });
    pos += size;
  };
  const u32 = () => dv.getUint32(pos, true);
  const u64 = () => Number(dv.getBigUint64(pos, true));
  const string = (owner: string): string => {
    const len = u64();
    field("string_length", 8, owner);
    const s = new TextDecoder().decode(bytes.subarray(pos, pos + len));
    if (len > 0) field("string_bytes", len, owner);
    return s;
  };
  const value = (type: number, owner: string): void => {
    if (type === STRING) {
      string(owner);
    } else if (type === ARRAY) {
      const inner = u32();
      field("array_type", 4, owner);
      const n = u64();
      field("array_length", 8, owner);
      const outer = listing;
      for (let i = 0; i < n; i++) {
        listing = outer && (i < keepPerArray || i >= n - keepPerArray);
        value(inner, owner);
      }
      listing = outer;
    } else {
      field("scalar", SCALAR_SIZE[type], owner);
    }
  };

  field("magic", 4, "");
  field("version", 4, "");
  const nTensors = u64();
  field("tensor_count", 8, "");
  const nKv = u64();
  field("kv_count", 8, "");
  for (let i = 0; i < nKv; i++) {
    const key = string("key");
    const type = u32();
    field("value_type", 4, key);
    value(type, key);
  }
  for (let i = 0; i < nTensors; i++) {
    const name = string("tensor");
    const nDims = u32();
    field("n_dims", 4, name);
    for (let d = 0; d < nDims; d++) field("dim", 8, name);
    field("tensor_type", 4, name);
    field("tensor_offset", 8, name);
  }
  return { fields, end: pos };
}
