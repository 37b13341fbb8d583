import { NeuronError } from "../../common/errors.ts";

export type CpuKernelErrorCode =
  | "cpu_kernels_unavailable"
  | "cpu_kernel_invalid"
  | "cpu_kernel_oom"
  | "cpu_out_of_memory"
  | "cpu_isa_unsupported";

/** Errors of the native CPU kernel library and its binding. */
export class CpuKernelError extends NeuronError {
  declare readonly code: CpuKernelErrorCode;

  constructor(code: CpuKernelErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

/** Turns a kernel's return code into an exception; 0 passes. */
export function checkStatus(op: string, rc: number): void {
  if (rc === 0) return;
  if (rc === -2) throw new CpuKernelError("cpu_kernel_oom", `${op}: out of memory`);
  if (rc === -3) {
    throw new CpuKernelError("cpu_isa_unsupported", `${op}: not supported by this CPU`);
  }
  throw new CpuKernelError("cpu_kernel_invalid", `${op}: invalid arguments (code ${rc})`);
}
