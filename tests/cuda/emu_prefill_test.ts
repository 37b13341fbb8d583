/**
 * The cuBLAS prefill path on the emulated GPU (tests/gpu/checks/prefill.ts): activations
 * past f16's range give the CPU backend's product, and a quantized weight is expanded to
 * f16 once and reused by later prefill steps.
 */

import { emulator, resetEmulator } from "./support.ts";
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
