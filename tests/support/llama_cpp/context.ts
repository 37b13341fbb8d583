/**
 * The llama_context_params every reference context is made with: the context and batch as
 * large as the test asks, ubatches of 512 (as the frozen goldens were made), the thread
 * count, the KV cache's types, and for pooling contexts the embeddings switched on with their
 * pooling type.
 */

import { checkedContextDefaults, CONTEXT, POOLING, type Pooling } from "./abi.ts";
import type { LlamaSymbols } from "./library.ts";

/** Tokens per ubatch. */
export const UBATCH_TOKENS = 512;

/**
 * One context for logits, one per pooling type asked of embed() ("model": the model's),
 * one per batch width of embedMany().
 */
export type ContextKind = "logits" | Pooling | "model" | `batch${number}`;

export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** ggml type ids of the KV cache types. */
const KV_TYPE_IDS: Record<KvCacheType, number> = { f16: 1, q8_0: 8, q4_0: 2 };
/** llama_flash_attn_type: enabled. */
const FLASH_ATTN_ENABLED = 1;

/** A context's KV cache: K's and V's types, and whether a quantized one is rotated. */
export interface KvCacheParams {
  k: KvCacheType;
  v: KvCacheType;
  rotate: boolean;
}

/** The params of a context of `kind` holding `nCtx` tokens. */
export function contextParams(
  sym: LlamaSymbols,
  nCtx: number,
  threads: number,
  kind: ContextKind,
  cache: KvCacheParams = { k: "f16", v: "f16", rotate: true },
): Uint8Array {
  const params = sym.llama_context_default_params();
  const view = checkedContextDefaults(params);
  view.setUint32(CONTEXT.n_ctx, nCtx, true);
  view.setUint32(CONTEXT.n_batch, nCtx, true);
  view.setUint32(CONTEXT.n_ubatch, Math.min(UBATCH_TOKENS, nCtx), true);
  view.setInt32(CONTEXT.n_threads, threads, true);
  view.setInt32(CONTEXT.n_threads_batch, threads, true);
  if (cache.k !== "f16" || cache.v !== "f16") {
    // Read by llama.cpp when it builds the context's cache, from these params.
    if (cache.rotate) Deno.env.delete("LLAMA_ATTN_ROT_DISABLE");
    else Deno.env.set("LLAMA_ATTN_ROT_DISABLE", "1");
    view.setInt32(CONTEXT.type_k, KV_TYPE_IDS[cache.k], true);
    view.setInt32(CONTEXT.type_v, KV_TYPE_IDS[cache.v], true);
    // llama.cpp needs flash attention for a quantized V.
    view.setInt32(CONTEXT.flash_attn_type, FLASH_ATTN_ENABLED, true);
  }
  if (kind.startsWith("batch")) {
    // Sequences share one KV cache, as the embedding example has them.
    view.setUint32(CONTEXT.n_seq_max, Number(kind.slice("batch".length)), true);
    view.setUint8(CONTEXT.kv_unified, 1);
  }
  if (kind !== "logits") {
    view.setUint8(CONTEXT.embeddings, 1);
    const pooling = kind === "model" || kind.startsWith("batch") ? "unspecified" : kind;
    view.setInt32(CONTEXT.pooling_type, POOLING[pooling as Pooling | "unspecified"], true);
  }
  return params;
}
