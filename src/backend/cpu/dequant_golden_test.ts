/**
 * The C reference dequantizer against llama.cpp's (gguf-py) dequantized values of every
 * tensor in the model fixtures: first and last 64 values exactly, sums to 1e-6 relative.
 */

import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { openGguf } from "../../gguf/mod.ts";
import { fixture } from "../../../tests/fixtures.ts";
import { testKernels } from "../../../tests/support/cpu_kernels.ts";

interface TensorGolden {
  type: string;
  ne: number[];
  first64: number[];
  last64: number[];
  sum: number;
  sum_sq: number;
}

const golden: { files: Record<string, Record<string, TensorGolden>> } = JSON.parse(
  Deno.readTextFileSync(fixture("golden/dequant.json")),
);

for (const [file, tensors] of Object.entries(golden.files)) {
  Deno.test(`nk_dequantize_rows matches llama.cpp on every tensor of ${file}`, async () => {
    const k = await testKernels();
    const gguf = openGguf(fixture(file));
    try {
      for (const [name, g] of Object.entries(tensors)) {
        const t = gguf.requireTensor(name);
        assertEquals(t.type.name, g.type, name);
        const cols = t.ne[0], rows = t.nElements / cols;
        const out = new Float32Array(t.nElements);
        k.dequantizeRows(t.type.id, gguf.data(t), rows, cols, out);
        assertEquals(Array.from(out.subarray(0, 64)), g.first64, `${name} first64`);
        assertEquals(Array.from(out.subarray(out.length - 64)), g.last64, `${name} last64`);
        let sum = 0, sumSq = 0;
        for (const v of out) {
          sum += v;
          sumSq += v * v;
        }
        assert(
          Math.abs(sum - g.sum) <= 1e-6 * Math.max(1, Math.abs(g.sum)),
          `${name} sum ${sum} vs ${g.sum}`,
        );
        assert(Math.abs(sumSq - g.sum_sq) <= 1e-6 * g.sum_sq, `${name} sum_sq`);
      }
    } finally {
      gguf.close();
    }
  });
}
