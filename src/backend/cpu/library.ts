/**
 * Where the CPU kernel library lives and its FFI symbol table. `NEURON_CPU_LIB` overrides
 * the location; by default it is `kernels/build/libneuron_cpu.so` of this checkout, built
 * by `deno task kernels:cpu`, or in a compiled executable the embedded copy, extracted to
 * the cache directory (src/common/assets.ts).
 */

import { nativeAssetPath } from "../../common/assets.ts";
import { errorMessage } from "../../common/errors.ts";
import { CpuKernelError } from "./errors.ts";

/** Values of a draw's parameters (nk.h's NK_SAMPLE_PARAMS). */
export const NK_SAMPLE_PARAMS = 6;
/** Entries of the exp table a draw reads (e^(-k/256), k = 0..64 * 256). */
export const EXP_TABLE_LENGTH = 64 * 256 + 1;

export const CPU_SYMBOLS = {
  nk_cpu_features: { parameters: [], result: "u32" },
  nk_best_isa: { parameters: [], result: "i32" },
  nk_pool_create: { parameters: ["i32"], result: "pointer" },
  nk_pool_destroy: { parameters: ["pointer"], result: "void" },
  nk_pool_threads: { parameters: ["pointer"], result: "i32" },
  nk_pool_set_isa: { parameters: ["pointer", "i32"], result: "i32" },
  nk_pool_isa: { parameters: ["pointer"], result: "i32" },
  nk_pool_set_page_prefetch: { parameters: ["pointer", "i32"], result: "void" },
  nk_alloc: { parameters: ["u64"], result: "pointer" },
  nk_alloc_huge: { parameters: ["u64"], result: "pointer" },
  nk_free: { parameters: ["pointer"], result: "void" },
  nk_row_bytes: { parameters: ["i32", "i64"], result: "i64" },
  nk_r16_type: { parameters: ["i32"], result: "i32" },
  nk_repack: {
    parameters: ["pointer", "i32", "pointer", "i64", "i64", "pointer"],
    result: "i32",
  },
  nk_matmul: {
    parameters: ["pointer", "i32", "pointer", "i64", "i64", "pointer", "i64", "pointer"],
    result: "i32",
  },
  nk_matmul_many: {
    parameters: ["pointer", "i32", "buffer", "buffer", "buffer", "i64", "pointer", "i64", "buffer"],
    result: "i32",
  },
  nk_matmul_ref: {
    parameters: ["pointer", "i32", "pointer", "i64", "i64", "pointer", "i64", "pointer"],
    result: "i32",
  },
  nk_dequantize_rows: {
    parameters: ["i32", "pointer", "i64", "i64", "pointer"],
    result: "i32",
  },
  nk_get_rows: {
    parameters: ["pointer", "i32", "pointer", "i64", "i64", "pointer", "i64", "pointer"],
    result: "i32",
  },
  nk_rmsnorm: {
    parameters: ["pointer", "pointer", "pointer", "pointer", "i64", "i64", "f32"],
    result: "i32",
  },
  nk_rope: {
    parameters: [
      "pointer",
      "pointer",
      "i64",
      "i64",
      "i64",
      "pointer",
      "f32",
      "f32",
      "pointer",
      "i32",
      "pointer",
    ],
    result: "i32",
  },
  nk_kv_store: {
    parameters: [
      "pointer",
      "pointer",
      "pointer",
      "i32",
      "i64",
      "pointer",
      "pointer",
      "i64",
      "i64",
      "i64",
      "pointer",
      "pointer",
    ],
    result: "i32",
  },
  nk_attention: {
    parameters: [
      "pointer",
      "pointer",
      "pointer",
      "pointer",
      "pointer",
      "i32",
      "i64",
      "pointer",
      "pointer",
      "i64",
      "i64",
      "i64",
      "i64",
      "f32",
      "i64",
    ],
    result: "i32",
  },
  nk_silu_mul: {
    parameters: ["pointer", "pointer", "pointer", "pointer", "i64"],
    result: "i32",
  },
  nk_gelu_mul: {
    parameters: ["pointer", "pointer", "pointer", "pointer", "i64"],
    result: "i32",
  },
  nk_add: { parameters: ["pointer", "pointer", "pointer", "pointer", "i64"], result: "i32" },
  nk_add_bias: {
    parameters: ["pointer", "pointer", "pointer", "pointer", "i64", "i64"],
    result: "i32",
  },
  nk_scale: { parameters: ["pointer", "pointer", "pointer", "f32", "i64"], result: "i32" },
  nk_argmax_rows: { parameters: ["pointer", "pointer", "i64", "i64", "pointer"], result: "i32" },
  nk_argmax_rows_masked_ref: {
    parameters: ["pointer", "i64", "i64", "buffer", "pointer"],
    result: "i32",
  },
  nk_sample_scratch_bytes: { parameters: ["i64"], result: "i64" },
  nk_sample_draw: { parameters: ["buffer", "i64", "buffer", "buffer", "buffer"], result: "i64" },
  nk_sample_draw_rows: {
    parameters: ["pointer", "buffer", "i64", "i64", "buffer", "i64", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  nk_sample_draw_ref: {
    parameters: ["buffer", "i64", "buffer", "buffer", "buffer"],
    result: "i64",
  },
  nk_sample_logprobs: {
    parameters: ["buffer", "i64", "buffer", "i32", "buffer", "buffer"],
    result: "i32",
  },
  nk_sample_logprobs_ref: {
    parameters: ["buffer", "i64", "buffer", "i32", "buffer", "buffer"],
    result: "i32",
  },
  nk_token_mask_walk: {
    parameters: [
      "buffer",
      "buffer",
      "buffer",
      "buffer",
      "buffer",
      "buffer",
      "buffer",
      "buffer",
      "i64",
      "i64",
      "buffer",
    ],
    result: "i64",
  },
  nk_token_mask_apply: { parameters: ["buffer", "buffer", "buffer", "i64"], result: "void" },
  nk_matmul_experts_ref: {
    parameters: [
      "pointer",
      "i32",
      "pointer",
      "i64",
      "i64",
      "i64",
      "i64",
      "pointer",
      "i64",
      "pointer",
      "i64",
      "i64",
      "pointer",
    ],
    result: "i32",
  },
  nk_run_ops: {
    parameters: ["pointer", "buffer", "i64", "buffer", "buffer", "buffer", "i32", "buffer"],
    result: "i32",
  },
  nk_f16_to_f32: { parameters: ["pointer", "pointer", "i64"], result: "void" },
  nk_f32_to_f16: { parameters: ["pointer", "pointer", "i64"], result: "void" },
  nk_bandwidth: { parameters: ["pointer", "u64", "i32"], result: "f64" },
  nk_prefault: { parameters: ["pointer", "pointer", "u64"], result: "i32" },
  nk_read_checksum: {
    parameters: ["pointer", "buffer", "i64", "i32", "buffer"],
    result: "i32",
  },
} as const;

export type CpuLibrary = Deno.DynamicLibrary<typeof CPU_SYMBOLS>;
export type CpuSymbols = CpuLibrary["symbols"];

/** The library's path: `$NEURON_CPU_LIB`, else the build output (extracted when compiled). */
export function cpuLibraryPath(): string {
  const fromEnv = Deno.env.get("NEURON_CPU_LIB");
  if (fromEnv) return fromEnv;
  try {
    return nativeAssetPath("kernels/build/libneuron_cpu.so");
  } catch (err) {
    throw new CpuKernelError("cpu_kernels_unavailable", errorMessage(err), { cause: err });
  }
}

const opened = new Map<string, CpuLibrary>();

/** Opens the library once per path (per isolate). */
export function openCpuLibrary(path: string = cpuLibraryPath()): CpuLibrary {
  const cached = opened.get(path);
  if (cached) return cached;
  try {
    Deno.statSync(path);
  } catch (err) {
    throw new CpuKernelError(
      "cpu_kernels_unavailable",
      `CPU kernel library not found at ${path}: run \`deno task kernels:cpu\` to build it`,
      { cause: err },
    );
  }
  let lib: CpuLibrary;
  try {
    lib = Deno.dlopen(path, CPU_SYMBOLS);
  } catch (err) {
    throw new CpuKernelError(
      "cpu_kernels_unavailable",
      `cannot load the CPU kernel library ${path} (${(err as Error).message}): ` +
        "run `deno task kernels:cpu` to rebuild it",
      { cause: err },
    );
  }
  opened.set(path, lib);
  return lib;
}
