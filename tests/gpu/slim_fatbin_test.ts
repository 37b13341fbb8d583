import { assertEquals, assertThrows } from "../support/assert.ts";
import { slimFatbin } from "./slim_fatbin.ts";

/** An image header as nvcc writes it: kind, header size, payload size, architecture. */
function image(kind: number, arch: number, payload: number[]): Uint8Array {
  const b = new Uint8Array(64 + payload.length);
  const v = new DataView(b.buffer);
  v.setUint16(0, kind, true);
  v.setUint32(4, 64, true);
  v.setBigUint64(8, BigInt(payload.length), true);
  v.setUint32(28, arch, true);
  b.set(payload, 64);
  return b;
}

function container(images: Uint8Array[]): Uint8Array {
  const body = images.reduce((n, i) => n + i.length, 0);
  const b = new Uint8Array(16 + body);
  const v = new DataView(b.buffer);
  v.setUint32(0, 0xba55ed50, true);
  v.setUint16(6, 16, true);
  v.setBigUint64(8, BigInt(body), true);
  let at = 16;
  for (const i of images) b.set(i, at), at += i.length;
  return b;
}

/** A minimal ELF64: the null section, .shstrtab, and .nv_fatbin holding `fatbin`. */
function elf(fatbin: Uint8Array): Uint8Array {
  const names = new TextEncoder().encode("\0.shstrtab\0.nv_fatbin\0");
  const dataAt = 64, namesAt = dataAt + fatbin.length, shoff = namesAt + names.length + 8;
  const b = new Uint8Array(shoff + 3 * 64);
  const v = new DataView(b.buffer);
  b.set([0x7f, 0x45, 0x4c, 0x46, 2, 1]);
  v.setBigUint64(0x28, BigInt(shoff), true);
  v.setUint16(0x3a, 64, true);
  v.setUint16(0x3c, 3, true);
  v.setUint16(0x3e, 1, true);
  b.set(fatbin, dataAt);
  b.set(names, namesAt);
  const section = (i: number, name: number, offset: number, size: number) => {
    v.setUint32(shoff + 64 * i, name, true);
    v.setBigUint64(shoff + 64 * i + 24, BigInt(offset), true);
    v.setBigUint64(shoff + 64 * i + 32, BigInt(size), true);
  };
  section(1, 1, namesAt, names.length);
  section(2, 11, dataAt, fatbin.length);
  return b;
}

Deno.test("slim fatbin: only the chosen architecture's PTX keeps its bytes, headers stay", () => {
  const ptx90 = image(1, 90, [1, 2, 3, 4, 5, 6, 7, 8]);
  const ptx80 = image(1, 80, [9, 9, 9, 9]);
  const sass90 = image(2, 90, [7, 7, 7, 7, 7, 7, 7, 7]);
  const fat = new Uint8Array([
    ...container([ptx80, ptx90]),
    ...new Uint8Array(8),
    ...container([sass90]),
  ]);
  const file = elf(fat);
  const before = file.slice();
  const r = slimFatbin(file, 90);
  assertEquals(r, { images: 3, keptBytes: 8, zeroedBytes: 12 });
  const at = 64 + 16;
  // Headers untouched; the compute_80 PTX and the sm_90 SASS zeroed; compute_90 PTX kept.
  assertEquals(file.subarray(at, at + 64), before.subarray(at, at + 64));
  assertEquals([...file.subarray(at + 64, at + 68)], [0, 0, 0, 0]);
  assertEquals([...file.subarray(at + 68 + 64, at + 68 + 72)], [1, 2, 3, 4, 5, 6, 7, 8]);
  const sassEnd = 64 + fat.length;
  assertEquals([...file.subarray(sassEnd - 8, sassEnd)], new Array(8).fill(0));
});

Deno.test("slim fatbin: no PTX for the architecture, or not an ELF file, is refused", () => {
  const file = elf(container([image(1, 80, [1, 2, 3, 4])]));
  assertEquals(assertThrows(() => slimFatbin(file, 90)).message, "no compute_90 PTX in the fatbin");
  assertEquals(
    assertThrows(() => slimFatbin(new Uint8Array(64), 90)).message,
    "not a little-endian ELF64 file",
  );
});
