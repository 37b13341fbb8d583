/**
 * The cuBLAS prefill path on the emulated GPU (tests/gpu/checks/prefill.ts): activations
 * past f16's range give the CPU backend's product, and a quantized weight is expanded to
 * f16 once and reused by later prefill steps.
 */

import { assertEquals, assertThrows } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { CudaError } from "../../src/backend/cuda/mod.ts";
import { buildCpuKernels } from "../../kernels/build_cpu.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { checkExpansionReuse, checkF16Overflow } from "../gpu/checks/prefill.ts";

const emu = await emulator();
if (emu) await buildCpuKernels();

Deno.test({
  name: "emulated cuBLAS prefill: activations past f16's range give the CPU backend's product",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    const cuda = emu!.backend();
    const cpu = new CpuBackend({ threads: 1 });
    try {
      checkF16Overflow(cuda, cpu);
    } finally {
      cuda.close();
      cpu.close();
    }
  },
});

Deno.test({
  name: "emulated cuBLAS prefill: a weight is expanded to f16 once and reused by later steps",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    checkExpansionReuse((expansionBytes) => emu!.backend({ expansionBytes }));
  },
});

Deno.test({
  name: "emulated cuBLAS prefill: a budget for f16 copies that is not a byte count is refused",
  ignore: emu === null,
  fn() {
    for (const expansionBytes of [-1, 0.5, NaN]) {
      const err = assertThrows(() => emu!.backend({ expansionBytes }), CudaError);
      assertEquals(err.code, "cuda_invalid_argument");
    }
  },
});
