/**
 * The libcuda driver API entry points the backend calls, by their exported (versioned)
 * names as cuda.h 13.0 maps them. Handles (contexts, streams, modules, functions, graphs,
 * events) are pointers; device addresses (CUdeviceptr) are u64; out-parameters are
 * buffers. All calls are synchronous FFI calls on the engine's own thread, where the
 * context is current.
 */
export const DRIVER_SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuDriverGetVersion: { parameters: ["buffer"], result: "i32" },
  cuDeviceGetCount: { parameters: ["buffer"], result: "i32" },
  cuDeviceGet: { parameters: ["buffer", "i32"], result: "i32" },
  cuDeviceGetName: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuDeviceTotalMem_v2: { parameters: ["buffer", "i32"], result: "i32" },
  cuDeviceGetAttribute: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuDevicePrimaryCtxRetain: { parameters: ["buffer", "i32"], result: "i32" },
  cuDevicePrimaryCtxRelease_v2: { parameters: ["i32"], result: "i32" },
  cuCtxSetCurrent: { parameters: ["pointer"], result: "i32" },
  cuCtxSynchronize: { parameters: [], result: "i32" },
  cuMemGetInfo_v2: { parameters: ["buffer", "buffer"], result: "i32" },
  cuMemAlloc_v2: { parameters: ["buffer", "u64"], result: "i32" },
  cuMemFree_v2: { parameters: ["u64"], result: "i32" },
  cuMemAllocHost_v2: { parameters: ["buffer", "u64"], result: "i32" },
  cuMemFreeHost: { parameters: ["pointer"], result: "i32" },
  cuMemcpyHtoDAsync_v2: { parameters: ["u64", "pointer", "u64", "pointer"], result: "i32" },
  cuMemcpyDtoHAsync_v2: { parameters: ["pointer", "u64", "u64", "pointer"], result: "i32" },
  cuMemcpyDtoDAsync_v2: { parameters: ["u64", "u64", "u64", "pointer"], result: "i32" },
  cuMemsetD8Async: { parameters: ["u64", "u8", "u64", "pointer"], result: "i32" },
  cuStreamCreate: { parameters: ["buffer", "u32"], result: "i32" },
  cuStreamDestroy_v2: { parameters: ["pointer"], result: "i32" },
  cuStreamSynchronize: { parameters: ["pointer"], result: "i32" },
  cuEventCreate: { parameters: ["buffer", "u32"], result: "i32" },
  cuEventDestroy_v2: { parameters: ["pointer"], result: "i32" },
  cuEventRecord: { parameters: ["pointer", "pointer"], result: "i32" },
  cuEventSynchronize: { parameters: ["pointer"], result: "i32" },
  cuEventElapsedTime_v2: {
    parameters: ["buffer", "pointer", "pointer"],
    result: "i32",
    optional: true,
  },
  cuEventElapsedTime: {
    parameters: ["buffer", "pointer", "pointer"],
    result: "i32",
    optional: true,
  },
  cuModuleLoadDataEx: {
    parameters: ["buffer", "buffer", "u32", "buffer", "buffer"],
    result: "i32",
  },
  cuModuleUnload: { parameters: ["pointer"], result: "i32" },
  cuModuleGetFunction: { parameters: ["buffer", "pointer", "buffer"], result: "i32" },
  cuLaunchKernel: {
    parameters: [
      "pointer",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "u32",
      "pointer",
      "pointer",
      "pointer",
    ],
    result: "i32",
  },
  cuStreamBeginCapture_v2: { parameters: ["pointer", "i32"], result: "i32" },
  cuStreamEndCapture: { parameters: ["pointer", "buffer"], result: "i32" },
  cuGraphInstantiateWithFlags: { parameters: ["buffer", "pointer", "u64"], result: "i32" },
  cuGraphLaunch: { parameters: ["pointer", "pointer"], result: "i32" },
  cuGraphExecDestroy: { parameters: ["pointer"], result: "i32" },
  cuGraphDestroy: { parameters: ["pointer"], result: "i32" },
  cuGetErrorName: { parameters: ["i32", "buffer"], result: "i32", optional: true },
  cuGetErrorString: { parameters: ["i32", "buffer"], result: "i32", optional: true },
} as const;

export type DriverSymbols = Deno.DynamicLibrary<typeof DRIVER_SYMBOLS>["symbols"];

/** cuDeviceGetAttribute ids (CUdevice_attribute). */
export const ATTR = {
  MAX_THREADS_PER_BLOCK: 1,
  MULTIPROCESSOR_COUNT: 16,
  L2_CACHE_SIZE: 38,
  COMPUTE_CAPABILITY_MAJOR: 75,
  COMPUTE_CAPABILITY_MINOR: 76,
} as const;

export const CU_STREAM_NON_BLOCKING = 1;
export const CU_EVENT_DISABLE_TIMING = 2;
export const CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
export const CU_JIT_ERROR_LOG_BUFFER = 5;
export const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
