/**
 * The C API of llama.cpp release v0.4.0 (include/llama.h at ggml commit 5b4ebc5), as much
 * of it as the reference uses. Parameter structs are never built from scratch: they come
 * from the library's `*_default_params()` and only fields at known offsets are changed.
 * The offsets below were printed by offsetof() against that llama.h; `checkDefaults`
 * reads every default llama.cpp documents back at its offset, so a library whose layout
 * differs fails loudly instead of being fed garbage.
 */

import { LlamaRefError } from "./errors.ts";

const MODEL_PARAMS = {
  struct: [
    "pointer", // devices
    "pointer", // tensor_buft_overrides
    "i32", // n_gpu_layers
    "i32", // split_mode
    "i32", // load_mode
    "i32", // lazy_mode
    "i32", // main_gpu
    "pointer", // tensor_split
    "pointer", // progress_callback
    "pointer", // progress_callback_user_data
    "pointer", // kv_overrides
    "bool", // vocab_only
    "bool", // check_tensors
    "bool", // use_extra_bufts
    "bool", // no_host
    "bool", // no_alloc
    "bool", // load_mtp
  ],
} as const;

const CONTEXT_PARAMS = {
  struct: [
    ...Array<"u32">(7).fill("u32"), // n_ctx .. n_outputs_max_per_seq
    ...Array<"i32">(7).fill("i32"), // n_threads, n_threads_batch, ctx_type .. flash_attn_type
    ...Array<"f32">(6).fill("f32"), // rope_freq_base .. yarn_beta_slow
    "u32", // yarn_orig_ctx
    "f32", // defrag_thold
    "pointer", // cb_eval
    "pointer", // cb_eval_user_data
    "i32", // type_k
    "i32", // type_v
    "pointer", // abort_callback
    "pointer", // abort_callback_data
    ...Array<"bool">(6).fill("bool"), // embeddings .. kv_unified
    "pointer", // samplers
    "usize", // n_samplers
    "pointer", // ctx_other
  ],
} as const;

/** llama_batch, passed by value to llama_decode. */
export const BATCH = {
  struct: ["i32", "pointer", "pointer", "pointer", "pointer", "pointer", "pointer"],
} as const;

export const MODEL_PARAMS_SIZE = 80;
export const CONTEXT_PARAMS_SIZE = 160;
export const BATCH_SIZE = 56;

/** Byte offsets in llama_model_params. */
export const MODEL = {
  n_gpu_layers: 16,
  split_mode: 20,
  load_mode: 24,
  lazy_mode: 28,
  vocab_only: 72,
  use_extra_bufts: 74,
} as const;

/** Byte offsets in llama_context_params. */
export const CONTEXT = {
  n_ctx: 0,
  n_batch: 4,
  n_ubatch: 8,
  n_seq_max: 12,
  n_outputs_max_per_seq: 24,
  n_threads: 28,
  n_threads_batch: 32,
  pooling_type: 44,
  flash_attn_type: 52,
  yarn_ext_factor: 64,
  defrag_thold: 84,
  type_k: 104,
  type_v: 108,
  embeddings: 128,
  offload_kqv: 129,
  no_perf: 130,
  swa_full: 132,
  kv_unified: 133,
} as const;

/** Byte offsets in llama_batch. */
export const BATCH_FIELDS = {
  n_tokens: 0,
  token: 8,
  embd: 16,
  pos: 24,
  n_seq_id: 32,
  seq_id: 40,
  logits: 48,
} as const;

export const GGML_TYPE_F16 = 1;

export const POOLING = { unspecified: -1, none: 0, mean: 1, cls: 2, last: 3, rank: 4 } as const;
export type Pooling = Exclude<keyof typeof POOLING, "unspecified">;

export const SYMBOLS = {
  llama_backend_init: { parameters: [], result: "void" },
  llama_log_set: { parameters: ["function", "pointer"], result: "void" },
  llama_model_default_params: { parameters: [], result: MODEL_PARAMS },
  llama_context_default_params: { parameters: [], result: CONTEXT_PARAMS },
  llama_model_load_from_file: {
    parameters: ["buffer", MODEL_PARAMS],
    result: "pointer",
    callback: true,
  },
  llama_model_free: { parameters: ["pointer"], result: "void", callback: true },
  llama_init_from_model: {
    parameters: ["pointer", CONTEXT_PARAMS],
    result: "pointer",
    callback: true,
  },
  llama_free: { parameters: ["pointer"], result: "void", callback: true },
  llama_attach_threadpool: { parameters: ["pointer", "pointer", "pointer"], result: "void" },
  llama_model_get_vocab: { parameters: ["pointer"], result: "pointer" },
  llama_model_n_embd: { parameters: ["pointer"], result: "i32" },
  llama_model_n_cls_out: { parameters: ["pointer"], result: "u32" },
  llama_model_meta_val_str: {
    parameters: ["pointer", "buffer", "buffer", "usize"],
    result: "i32",
  },
  llama_model_chat_template: { parameters: ["pointer", "pointer"], result: "pointer" },
  llama_vocab_n_tokens: { parameters: ["pointer"], result: "i32" },
  llama_vocab_is_eog: { parameters: ["pointer", "i32"], result: "bool" },
  llama_vocab_bos: { parameters: ["pointer"], result: "i32" },
  llama_vocab_eos: { parameters: ["pointer"], result: "i32" },
  llama_tokenize: {
    parameters: ["pointer", "buffer", "i32", "buffer", "i32", "bool", "bool"],
    result: "i32",
    callback: true,
  },
  llama_detokenize: {
    parameters: ["pointer", "buffer", "i32", "buffer", "i32", "bool", "bool"],
    result: "i32",
    callback: true,
  },
  llama_pooling_type: { parameters: ["pointer"], result: "i32" },
  llama_get_memory: { parameters: ["pointer"], result: "pointer" },
  llama_memory_clear: { parameters: ["pointer", "bool"], result: "void" },
  llama_memory_seq_rm: { parameters: ["pointer", "i32", "i32", "i32"], result: "bool" },
  llama_decode: { parameters: ["pointer", BATCH], result: "i32", callback: true },
  llama_get_logits_ith: { parameters: ["pointer", "i32"], result: "pointer" },
  llama_get_embeddings_ith: { parameters: ["pointer", "i32"], result: "pointer" },
  llama_get_embeddings_seq: { parameters: ["pointer", "i32"], result: "pointer" },
  llama_chat_apply_template: {
    parameters: ["buffer", "buffer", "usize", "bool", "buffer", "i32"],
    result: "i32",
    callback: true,
  },
  llama_sampler_init_grammar: {
    parameters: ["pointer", "buffer", "buffer"],
    result: "pointer",
    callback: true,
  },
  llama_sampler_apply: { parameters: ["pointer", "buffer"], result: "void", callback: true },
  llama_sampler_accept: { parameters: ["pointer", "i32"], result: "void", callback: true },
  llama_sampler_free: { parameters: ["pointer"], result: "void" },
} as const;

/** llama_token_data {id, logit, p} and llama_token_data_array {data, size, selected, sorted}. */
export const TOKEN_DATA_SIZE = 12;
export const TOKEN_DATA_ARRAY_SIZE = 32;

export const GGML_SYMBOLS = {
  ggml_backend_load: { parameters: ["buffer"], result: "pointer", callback: true },
} as const;

export const GGML_BASE_SYMBOLS = {
  ggml_commit: { parameters: [], result: "pointer" },
} as const;

type Field = readonly [
  name: string,
  offset: number,
  kind: "i32" | "u32" | "f32" | "bool",
  value: number,
];

/** llama_model_default_params() of this release, field by field. */
const MODEL_DEFAULTS: Field[] = [
  ["n_gpu_layers", MODEL.n_gpu_layers, "i32", -1],
  ["split_mode", MODEL.split_mode, "i32", 1],
  ["load_mode", MODEL.load_mode, "i32", -1],
  ["lazy_mode", MODEL.lazy_mode, "i32", 1],
  ["vocab_only", MODEL.vocab_only, "bool", 0],
  ["use_extra_bufts", MODEL.use_extra_bufts, "bool", 1],
];

/** llama_context_default_params() of this release, field by field. */
const CONTEXT_DEFAULTS: Field[] = [
  ["n_ctx", CONTEXT.n_ctx, "u32", 512],
  ["n_batch", CONTEXT.n_batch, "u32", 2048],
  ["n_ubatch", CONTEXT.n_ubatch, "u32", 512],
  ["n_seq_max", CONTEXT.n_seq_max, "u32", 1],
  ["n_outputs_max_per_seq", CONTEXT.n_outputs_max_per_seq, "u32", 1],
  ["n_threads", CONTEXT.n_threads, "i32", 4],
  ["n_threads_batch", CONTEXT.n_threads_batch, "i32", 4],
  ["pooling_type", CONTEXT.pooling_type, "i32", -1],
  ["flash_attn_type", CONTEXT.flash_attn_type, "i32", -1],
  ["yarn_ext_factor", CONTEXT.yarn_ext_factor, "f32", -1],
  ["defrag_thold", CONTEXT.defrag_thold, "f32", -1],
  ["type_k", CONTEXT.type_k, "i32", GGML_TYPE_F16],
  ["type_v", CONTEXT.type_v, "i32", GGML_TYPE_F16],
  ["embeddings", CONTEXT.embeddings, "bool", 0],
  ["offload_kqv", CONTEXT.offload_kqv, "bool", 1],
  ["no_perf", CONTEXT.no_perf, "bool", 1],
  ["swa_full", CONTEXT.swa_full, "bool", 1],
  ["kv_unified", CONTEXT.kv_unified, "bool", 0],
];

function read(view: DataView, offset: number, kind: Field[2]): number {
  if (kind === "i32") return view.getInt32(offset, true);
  if (kind === "u32") return view.getUint32(offset, true);
  if (kind === "f32") return view.getFloat32(offset, true);
  return view.getUint8(offset);
}

function checkDefaults(what: string, bytes: Uint8Array, size: number, fields: Field[]): void {
  if (bytes.byteLength !== size) {
    throw new LlamaRefError(
      "llama_ref_abi",
      `${what} is ${bytes.byteLength} bytes here, ${size} in llama.h`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (const [name, offset, kind, value] of fields) {
    const got = read(view, offset, kind);
    if (got !== value) {
      throw new LlamaRefError(
        "llama_ref_abi",
        `${what}.${name} (offset ${offset}) defaults to ${got}, llama.h says ${value}: ` +
          `the library's struct layout is not the one this binding mirrors`,
      );
    }
  }
}

/** The default model params, checked against llama.h's layout. */
export function checkedModelDefaults(bytes: Uint8Array): DataView {
  checkDefaults("llama_model_params", bytes, MODEL_PARAMS_SIZE, MODEL_DEFAULTS);
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The default context params, checked against llama.h's layout. */
export function checkedContextDefaults(bytes: Uint8Array): DataView {
  checkDefaults("llama_context_params", bytes, CONTEXT_PARAMS_SIZE, CONTEXT_DEFAULTS);
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The CPU backend's threadpool (ggml-cpu.h), from the CPU variant's own library. */
export const GGML_CPU_SYMBOLS = {
  ggml_threadpool_new: { parameters: ["buffer"], result: "pointer" },
  ggml_threadpool_free: { parameters: ["pointer"], result: "void" },
} as const;

/**
 * struct ggml_threadpool_params (ggml.h): bool cpumask[GGML_MAX_N_THREADS = 512], then
 * int n_threads, enum prio, uint32 poll, bool strict_cpu, bool paused; 528 bytes.
 */
export const THREADPOOL_PARAMS = { bytes: 528, n_threads: 512, prio: 516, poll: 520 } as const;
