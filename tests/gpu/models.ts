/**
 * The synthetic models the GPU bench, the profile and the llama.cpp comparison time, by the
 * name their --models lists use; each file is written on first use into the synthetic cache
 * (src/bench/synthetic.ts), so one device call writes it once for all three.
 */

import { syntheticModel } from "../../src/bench/synthetic.ts";

export interface GpuModel {
  label: string;
  path: () => string;
}

export const GPU_MODELS: Readonly<Record<string, GpuModel>> = {
  "0.6b": { label: "qwen3-0.6b Q8_0", path: () => syntheticModel("qwen3-0.6b", "q8_0") },
  "8b": { label: "qwen3-8b Q4_K_M", path: () => syntheticModel("qwen3-8b", "q4_k_m") },
  "30b": { label: "qwen3-30b-a3b Q4_K_M", path: () => syntheticModel("qwen3-30b-a3b", "q4_k_m") },
};

/** The models of a comma-separated --models list, among GPU_MODELS and `more`; an unknown
 * name is an error. */
export function gpuModels(
  list: string,
  more: Readonly<Record<string, GpuModel>> = {},
): GpuModel[] {
  const known = { ...GPU_MODELS, ...more };
  return list.split(",").map((m) => {
    const c = known[m.trim()];
    if (c === undefined) {
      throw new Error(`--models: ${m} is not one of ${Object.keys(known).join(", ")}`);
    }
    return c;
  });
}
