/**
 * The Walsh-Hadamard rotation of the native kernel (n log n butterflies, isa_hadamard.c)
 * against the reference backend's n^2 product, at every dispatch level of this CPU with one
 * thread and two (prefill-sized rows split); every level gives the same bits.
 */

import { assertEquals } from "../../../tests/support/assert.ts";
import { CpuBackend } from "./cpu_backend.ts";
import { Pair } from "../../../tests/gpu/checks/pair.ts";
import { checkHadamard } from "../../../tests/gpu/checks/ops.ts";

for (const threads of [1, 2]) {
  Deno.test(`hadamard on ${threads} thread(s), every level, matches the reference's product; twice is the input`, () => {
    const be = new CpuBackend({ threads });
    try {
      for (const isa of be.kernels.supportedIsas()) {
        be.pool.isa = isa;
        checkHadamard(new Pair(be));
      }
    } finally {
      be.close();
    }
  });
}

Deno.test("hadamard: every level rotates to the same bits", () => {
  const be = new CpuBackend({ threads: 1 });
  try {
    const data = Float32Array.from({ length: 4 * 512 }, (_, i) => Math.sin(i * 1.7) * (i % 37));
    const bits = be.kernels.supportedIsas().map((isa) => {
      be.pool.isa = isa;
      const pair = new Pair(be);
      const x = pair.upload(data, 4, 512);
      for (const n of [2, 16, 64, 128, 512]) be.hadamard(x.dev, n);
      return Array.from(be.read(x.dev));
    });
    for (const b of bits.slice(1)) assertEquals(b, bits[0]);
  } finally {
    be.close();
  }
});
