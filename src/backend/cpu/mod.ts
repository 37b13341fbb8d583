/** The native CPU kernel library: loading, native buffers, the per-model thread pool. */
export { CpuKernelError, type CpuKernelErrorCode } from "./errors.ts";
export { cpuLibraryPath, openCpuLibrary } from "./library.ts";
export {
  CpuKernels,
  ISA_LEVELS,
  type IsaLevel,
  KV_F16,
  KV_F32,
  type KvLayout,
  kvLayoutBytes,
  type KvType,
  NativeBuffer,
  type Operand,
  Pool,
} from "./kernels.ts";
