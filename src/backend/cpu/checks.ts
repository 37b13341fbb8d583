/** Argument checks shared by the kernel wrappers. */

import { CpuKernelError } from "./errors.ts";

export function checkDims(op: string, dims: Record<string, number>, allowZero = false): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isSafeInteger(v) || v < 0 || (!allowZero && v === 0)) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${name} must be a positive integer, got ${v}`,
      );
    }
  }
}
