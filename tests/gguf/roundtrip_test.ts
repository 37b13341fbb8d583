/**
 * Read every fixture, write it back with the writer, read it again: metadata, tensor table
 * and data are identical, and since the layout rules match llama.cpp's and gguf-py's
 * writers, so is every byte of the file.
 */

import { assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { openGguf, writeGguf } from "../../src/gguf/mod.ts";

const FILES = [
  "qwen3-vocab.gguf",
  "qwen3-tiny-f16.gguf",
  "qwen3-tiny-q8_0.gguf",
  "qwen3-tiny-q4_0.gguf",
  "qwen3-small-q4_k_m.gguf",
];

/** Index of the first differing byte, or -1 (compared 8 bytes at a time where possible). */
function firstDifference(a: Uint8Array, b: Uint8Array): number {
  if (a.byteLength !== b.byteLength) return Math.min(a.byteLength, b.byteLength);
  const words = Math.floor(a.byteLength / 8);
  const wa = new BigUint64Array(a.buffer, a.byteOffset, words);
  const wb = new BigUint64Array(b.buffer, b.byteOffset, words);
  let i = 0;
  while (i < words && wa[i] === wb[i]) i++;
  for (let j = i * 8; j < a.byteLength; j++) if (a[j] !== b[j]) return j;
  return -1;
}

for (const name of FILES) {
  Deno.test(`${name} survives read -> write -> read byte for byte`, () => {
    const dir = Deno.makeTempDirSync({ prefix: "neuron-gguf-" });
    const original = openGguf(fixture(name));
    try {
      const out = `${dir}/${name}`;
      const layout = writeGguf(out, {
        version: original.version as 3,
        kv: original.kv,
        tensors: original.tensors.map((t) => ({
          name: t.name,
          type: t.type,
          ne: t.ne,
          data: original.data(t),
        })),
      });
      assertEquals(layout.dataOffset, original.dataOffset);
      const copy = openGguf(out);
      try {
        assertEquals(copy.version, original.version);
        assertEquals(copy.alignment, original.alignment);
        assertEquals(copy.kv, original.kv);
        assertEquals(copy.tensors, original.tensors);
        for (const t of original.tensors) {
          assertEquals(
            firstDifference(copy.data(copy.requireTensor(t.name)), original.data(t)),
            -1,
            t.name,
          );
        }
      } finally {
        copy.close();
      }
      assertEquals(firstDifference(Deno.readFileSync(out), Deno.readFileSync(fixture(name))), -1);
    } finally {
      original.close();
      Deno.removeSync(dir, { recursive: true });
    }
  });
}
