/**
 * The reference quantizers against files llama-quantize wrote: the tiny Q8_0 and Q4_0
 * fixtures were quantized from the same weights as the F16 one, so quantizing those F16
 * values must give their bytes exactly; the K-quant fixture's values must be a fixed
 * point of our Q4_K and Q6_K quantizers (re-quantizing them gives the same values).
 */

import { assert, assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { dequantize, GgmlType, type GgufFile, openGguf, quantize } from "../../src/gguf/mod.ts";

function withFixtures(names: string[], fn: (...files: GgufFile[]) => void): void {
  const files = names.map((n) => openGguf(fixture(n)));
  try {
    fn(...files);
  } finally {
    for (const f of files) f.close();
  }
}

for (const target of ["qwen3-tiny-q8_0.gguf", "qwen3-tiny-q4_0.gguf"]) {
  Deno.test(`quantizing the F16 fixture reproduces ${target} byte for byte`, () => {
    withFixtures(["qwen3-tiny-f16.gguf", target], (f16, quantized) => {
      let checked = 0;
      for (const t of quantized.tensors) {
        if (t.type.id === GgmlType.F32) continue;
        const src = f16.requireTensor(t.name);
        const values = dequantize(src.type, f16.data(src), src.nElements);
        const ours = quantize(t.type, values);
        const theirs = quantized.data(t);
        let differing = 0;
        for (let i = 0; i < ours.length; i++) if (ours[i] !== theirs[i]) differing++;
        assertEquals(differing, 0, `${t.name} (${t.type.name}): bytes differing`);
        checked++;
      }
      assertEquals(checked, 15);
    });
  });
}

Deno.test("re-quantizing the Q4_K_M fixture's Q4_K and Q6_K tensors keeps their values", () => {
  withFixtures(["qwen3-small-q4_k_m.gguf"], (file) => {
    for (const t of file.tensors) {
      if (t.type.id !== GgmlType.Q4_K && t.type.id !== GgmlType.Q6_K) continue;
      if (t.nElements > 1 << 20) continue; // the two vocabulary-sized tensors add only time
      const values = dequantize(t.type, file.data(t), t.nElements);
      const again = dequantize(t.type, quantize(t.type, values), t.nElements);
      let err = 0, sig = 0, exact = 0;
      for (let i = 0; i < values.length; i++) {
        err += (values[i] - again[i]) ** 2;
        sig += values[i] ** 2;
        if (values[i] === again[i]) exact++;
      }
      const rel = Math.sqrt(err / sig);
      assert(rel < 1e-3, `${t.name}: relative RMS change ${rel}`);
      assert(exact / values.length > 0.999, `${t.name}: ${exact} of ${values.length} exact`);
    }
  });
});
