/**
 * The reference dequantizers against llama.cpp's (gguf-py's) dequantized values for every
 * tensor of the four model fixtures, and the reader's tensor table against the golden's.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { dequantize, openGguf } from "../../src/gguf/mod.ts";

interface GoldenTensor {
  type: string;
  ne: number[];
  offset: number;
  n_bytes: number;
  first64: number[];
  last64: number[];
  sum: number;
  sum_sq: number;
}

const golden: { files: Record<string, Record<string, GoldenTensor>> } = JSON.parse(
  Deno.readTextFileSync(fixture("golden/dequant.json")),
);

function close(got: number, want: number, what: string): void {
  const rel = Math.abs(got - want) / Math.max(Math.abs(want), 1e-12);
  assert(rel <= 1e-6, `${what}: ${got} vs golden ${want} (relative ${rel.toExponential(2)})`);
}

for (const [file, tensors] of Object.entries(golden.files)) {
  Deno.test(`${file}: every tensor dequantizes to llama.cpp's values`, () => {
    const gguf = openGguf(fixture(file));
    try {
      assertEquals(gguf.tensors.map((t) => t.name).sort(), Object.keys(tensors).sort());
      for (const [name, want] of Object.entries(tensors)) {
        const t = gguf.requireTensor(name);
        assertEquals(
          { type: t.type.name, ne: t.ne, offset: t.offset, n_bytes: t.nBytes },
          { type: want.type, ne: want.ne, offset: want.offset, n_bytes: want.n_bytes },
          name,
        );
        const v = dequantize(t.type, gguf.data(t), t.nElements);
        const k = Math.min(64, v.length);
        assertEquals(Array.from(v.subarray(0, k)), want.first64, `${name} first values`);
        assertEquals(Array.from(v.subarray(v.length - k)), want.last64, `${name} last values`);
        let sum = 0, sumSq = 0;
        for (let i = 0; i < v.length; i++) {
          sum += v[i];
          sumSq += v[i] * v[i];
        }
        close(sum, want.sum, `${name} sum`);
        close(sumSq, want.sum_sq, `${name} sum of squares`);
      }
    } finally {
      gguf.close();
    }
  });
}
