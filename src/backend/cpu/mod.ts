/** The native CPU kernel library: loading, native buffers, the per-model thread pool. */
export { CpuKernelError, type CpuKernelErrorCode } from "./errors.ts";
export { cpuLibraryPath, openCpuLibrary } from "./library.ts";
export {
  CpuKernels,
  ISA_LEVELS,
  type IsaLevel,
  KV_F16,
  KV_F32,
  KV_Q4_0,
  KV_Q8_0,
  type KvLayout,
  kvLayoutBytes,
  type KvType,
  kvTypeId,
  NativeBuffer,
  type Operand,
  Pool,
} from "./kernels.ts";
