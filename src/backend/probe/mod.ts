/** GPU discovery for /discovery and /health: CUDA driver API + NVML, both optional. */
export { DeviceProbe, type ProbeLibraries } from "./probe.ts";
export { cuResultName } from "../cuda/cu_result.ts";
export { cudaVersionString } from "./cuda.ts";
export type { DeviceHealth, DeviceInfo, Discovery } from "./types.ts";
