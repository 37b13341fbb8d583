/**
 * llama.cpp as a live test oracle: a GGUF file opened by the real llama.cpp (the prebuilt
 * CPU build of npm:@node-llama-cpp/linux-x64, see llama_cpp/package.ts), driven through
 * llama.h with Deno.dlopen. Tests and benchmarks only; never the product.
 *
 * Deterministic by construction: F16 KV cache, one sequence, a prompt decoded in one
 * llama_decode (split into ubatches of 512 by llama.cpp, as the frozen goldens were), then
 * one token per llama_decode. Every call starts from an empty KV cache. The thread count
 * is part of the setting: short prompts give the same logits bit for bit on 1 and 2
 * threads, but long ones on quantized weights need not (the goldens were made with 2).
 *
 * ```ts
 * using model = await openLlamaModel(path);
 * const ids = model.tokenize("Hello", { special: true, addSpecial: true });
 * const steps = model.greedy(ids, 32);
 * ```
 */

import { LlamaRefError } from "./llama_cpp/errors.ts";
import {
  cString,
  type LlamaLibrary,
  llamaLibrary,
  type LlamaSymbols,
} from "./llama_cpp/library.ts";
import { checkedModelDefaults, MODEL, POOLING, type Pooling } from "./llama_cpp/abi.ts";
import { type ContextKind, contextParams, UBATCH_TOKENS } from "./llama_cpp/context.ts";
import { detokenize, metaValue, tokenize } from "./llama_cpp/text.ts";
import { decode, decodeSequences, floats } from "./llama_cpp/batch.ts";
import { argmaxMargin, topLogits } from "./logits.ts";
import { LlamaGrammar } from "./llama_cpp/grammar.ts";
import { applyChatTemplate, type ChatMessage } from "./llama_cpp/chat.ts";
import { DEFAULT_THREADS, type LlamaOpenOptions } from "./llama_cpp/options.ts";

export { LlamaRefError } from "./llama_cpp/errors.ts";
export type { Pooling } from "./llama_cpp/abi.ts";
export { topLogits } from "./logits.ts";
export type { LlamaGrammar } from "./llama_cpp/grammar.ts";
export type { ChatMessage } from "./llama_cpp/chat.ts";
export type { LlamaOpenOptions } from "./llama_cpp/options.ts";

export interface GreedyStep {
  id: number;
  logit: number;
  /** Top-1 minus top-2 logit of the step's distribution. */
  margin: number;
  top5: Array<[number, number]>;
}

type Ptr = NonNullable<Deno.PointerValue>;

/** A model opened by llama.cpp. Not thread-safe; close it (or `using` it) when done. */
export class LlamaModel {
  readonly nVocab: number;
  readonly nEmbd: number;
  #lib: LlamaLibrary;
  #sym: LlamaSymbols;
  #model: Ptr | null;
  #vocab: Ptr;
  #options: LlamaOpenOptions;
  #contexts = new Map<ContextKind, Ptr>();
  #threadpools: Ptr[] = [];
  #eog: number[] | undefined;

  constructor(lib: LlamaLibrary, model: Ptr, readonly path: string, options: LlamaOpenOptions) {
    this.#lib = lib;
    this.#sym = lib.symbols;
    this.#model = model;
    this.#vocab = this.#sym.llama_model_get_vocab(model)!;
    this.#options = options;
    this.nVocab = this.#sym.llama_vocab_n_tokens(this.#vocab);
    this.nEmbd = this.#sym.llama_model_n_embd(model);
  }

  /** The CPU backend llama.cpp runs on, e.g. "zen4" (never the AMX build). */
  get cpuVariant(): string {
    return this.#lib.cpuVariant;
  }

  #live(): Ptr {
    if (this.#model === null) {
      throw new LlamaRefError("llama_ref_closed", `${this.path} was closed`);
    }
    return this.#model;
  }

  /** Text to ids as llama_tokenize does it. */
  tokenize(text: string, opts: { special: boolean; addSpecial: boolean }): number[] {
    this.#live();
    return tokenize(this.#sym, this.#vocab, text, opts);
  }

  /**
   * Ids to text as llama_detokenize does it: special tokens rendered unless told
   * (unparse_special), a leading BOS / trailing EOS kept unless told (remove_special). A
   * leading U+FEFF in the text is kept: it is text, not a byte-order mark.
   */
  detokenize(
    ids: readonly number[],
    opts: { special?: boolean; removeSpecial?: boolean } = {},
  ): string {
    this.#live();
    this.#checkIds(ids, 0);
    return detokenize(this.#sym, this.#vocab, ids, opts);
  }

  /** llama.cpp's grammar sampler over this vocabulary; null where it refuses the grammar. */
  grammar(text: string, root = "root"): LlamaGrammar | null {
    this.#live();
    if (this.#eog === undefined) {
      this.#eog = [];
      for (let id = 0; id < this.nVocab; id++) if (this.isEog(id)) this.#eog.push(id);
    }
    return LlamaGrammar.open(this.#sym, this.#vocab, text, this.#eog, root);
  }

  /** Whether llama.cpp counts `id` as an end of generation. */
  isEog(id: number): boolean {
    this.#live();
    return this.#sym.llama_vocab_is_eog(this.#vocab, id);
  }

  /** A metadata value as llama.cpp formats it, or undefined when the key is absent. */
  meta(key: string): string | undefined {
    return metaValue(this.#sym, this.#live(), key);
  }

  /**
   * The prompt llama_chat_apply_template makes of `messages` (llama.cpp's built-in
   * renderers, recognised from the model's template or `template`; not a Jinja engine).
   */
  chatTemplate(
    messages: readonly ChatMessage[],
    opts: { addAssistant?: boolean; template?: string } = {},
  ): string {
    const model = this.#live();
    let template = opts.template;
    if (template === undefined) {
      const ptr = this.#sym.llama_model_chat_template(model, null);
      if (ptr === null) {
        throw new LlamaRefError("llama_ref_unsupported", `${this.path} has no chat template`);
      }
      template = Deno.UnsafePointerView.getCString(ptr);
    }
    return applyChatTemplate(
      this.#sym,
      template,
      messages,
      opts.addAssistant ?? true,
      () => this.#lib.takeLog(),
    );
  }

  /** All logits at the last position of `tokens`. */
  logits(tokens: readonly number[]): Float32Array {
    const ctx = this.#fresh("logits", tokens, 0);
    this.#decode(ctx, tokens, 0, false);
    return floats(this.#sym.llama_get_logits_ith(ctx, -1), this.nVocab, "logits");
  }

  /**
   * Evaluates `tokens` in one batch at positions start.. (nothing before them in the cache)
   * and hands every token's logits (a copy, by index in `tokens`) to `visit`.
   */
  eachPosition(
    tokens: readonly number[],
    visit: (position: number, logits: Float32Array) => void,
    start = 0,
  ): void {
    const ctx = this.#fresh("logits", tokens, 0, start);
    this.#decode(ctx, tokens, start, true);
    for (let i = 0; i < tokens.length; i++) {
      visit(i, floats(this.#sym.llama_get_logits_ith(ctx, i), this.nVocab, "logits"));
    }
  }

  /**
   * `n` greedy steps after `tokens`: step k is the argmax after the prompt and steps
   * 0..k-1, one token per llama_decode, with no stop at end-of-generation tokens. The
   * prompt sits at positions start.. with nothing before it.
   */
  greedy(tokens: readonly number[], n: number, start = 0): GreedyStep[] {
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new LlamaRefError("llama_ref_bad_input", `greedy needs n >= 1, got ${n}`);
    }
    const ctx = this.#fresh("logits", tokens, n - 1, start);
    const steps: GreedyStep[] = [];
    let input: readonly number[] = tokens;
    let position = start;
    while (steps.length < n) {
      this.#decode(ctx, input, position, false);
      position += input.length;
      const logits = floats(this.#sym.llama_get_logits_ith(ctx, -1), this.nVocab, "logits");
      const { id, margin } = argmaxMargin(logits);
      steps.push({ id, logit: logits[id], margin, top5: topLogits(logits, 5) });
      input = [id];
    }
    return steps;
  }

  /**
   * llama-bench's -d: the cache filled with `depth` (untimed), then seconds to evaluate
   * `pp` in one batch after it, and (the positions past the depth dropped) seconds to
   * generate `tg` tokens greedily one at a time after it.
   */
  atDepth(depth: readonly number[], pp: readonly number[], tg: number): {
    ppSeconds: number;
    tgSeconds: number;
  } {
    const ctx = this.#fresh("logits", [...depth, ...pp], Math.max(0, tg - pp.length));
    if (depth.length > 0) this.#decode(ctx, depth, 0, false);
    const seconds = (fn: () => void): number => {
      const t0 = performance.now();
      fn();
      return (performance.now() - t0) / 1000;
    };
    const ppSeconds = seconds(() => this.#decode(ctx, pp, depth.length, false));
    this.#sym.llama_memory_seq_rm(this.#sym.llama_get_memory(ctx), 0, depth.length, -1);
    let next = pp[0];
    const tgSeconds = seconds(() => {
      for (let i = 0; i < tg; i++) {
        this.#decode(ctx, [next], depth.length + i, false);
        next =
          argmaxMargin(floats(this.#sym.llama_get_logits_ith(ctx, -1), this.nVocab, "logits")).id;
      }
    });
    return { ppSeconds, tgSeconds };
  }

  /**
   * The embedding of `tokens` pooled by `pooling` (llama_get_embeddings_seq), or with
   * "none" the last position's: the final hidden state after the output norm. By default
   * the model's own pooling type, which for a generative model is none. Rank pooling gives
   * the classifier's outputs (`n_cls_out` of them; a reranker's score is the first).
   */
  embed(tokens: readonly number[], pooling?: Pooling): Float32Array {
    const ctx = this.#fresh(pooling ?? "model", tokens, 0);
    this.#decode(ctx, tokens, 0, true);
    const type = this.#sym.llama_pooling_type(ctx);
    if (type === POOLING.none) {
      return floats(this.#sym.llama_get_embeddings_ith(ctx, -1), this.nEmbd, "embeddings");
    }
    const width = type === POOLING.rank ? this.nClsOut : this.nEmbd;
    return floats(this.#sym.llama_get_embeddings_seq(ctx, 0), width, "pooled embedding");
  }

  /**
   * The model's own pooled embeddings of many inputs, batched as llama.cpp's embedding
   * example batches them: whole inputs, up to `perBatch` sequences and 512 tokens per
   * llama_decode (one ubatch), each sequence read with llama_get_embeddings_seq. For
   * throughput comparisons; every input must fit in 512 tokens.
   */
  embedMany(inputs: readonly (readonly number[])[], perBatch: number): Float32Array[] {
    const kind = `batch${perBatch}` as const;
    const out: Float32Array[] = [];
    let batch: (readonly number[])[] = [];
    const flush = (): void => {
      if (batch.length === 0) return;
      const ctx = this.#fresh(kind, batch.flat(), 0);
      const rc = decodeSequences(this.#sym, ctx, batch);
      if (rc !== 0) {
        throw new LlamaRefError(
          "llama_ref_decode",
          `llama_decode of ${batch.length} inputs: ${rc}`,
        );
      }
      batch.forEach((_, s) => {
        out.push(floats(this.#sym.llama_get_embeddings_seq(ctx, s), this.nEmbd, "embedding"));
      });
      batch = [];
    };
    for (const input of inputs) {
      if (input.length > UBATCH_TOKENS) {
        throw new LlamaRefError("llama_ref_bad_input", `an input of ${input.length} tokens`);
      }
      const tokens = batch.reduce((n, s) => n + s.length, 0);
      if (batch.length === perBatch || tokens + input.length > UBATCH_TOKENS) flush();
      batch.push(input);
    }
    flush();
    return out;
  }

  /** Outputs of the model's classifier head (cls.output), 1 when it names no labels. */
  get nClsOut(): number {
    return this.#sym.llama_model_n_cls_out(this.#live());
  }

  /** Frees llama.cpp's context(s) and model; later calls throw llama_ref_closed. */
  close(): void {
    if (this.#model === null) return;
    for (const ctx of this.#contexts.values()) this.#sym.llama_free(ctx);
    this.#contexts.clear();
    for (const pool of this.#threadpools) this.#lib.freeThreadpool(pool);
    this.#threadpools = [];
    this.#sym.llama_model_free(this.#model);
    this.#model = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  get contextLength(): number {
    return this.#options.contextLength ?? 2048;
  }

  #checkIds(ids: readonly number[], extra: number): void {
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.nVocab) {
        throw new LlamaRefError(
          "llama_ref_bad_input",
          `token ${id} is outside the vocabulary of ${this.nVocab}`,
        );
      }
    }
    if (ids.length + extra > this.contextLength) {
      throw new LlamaRefError(
        "llama_ref_bad_input",
        `${ids.length} tokens + ${extra} steps exceed the context of ${this.contextLength}`,
      );
    }
  }

  /** The context for `kind`, created on first use, its KV cache emptied. */
  #fresh(kind: ContextKind, tokens: readonly number[], extra: number, start = 0): Ptr {
    const model = this.#live();
    if (this.#options.vocabOnly) {
      throw new LlamaRefError("llama_ref_unsupported", `${this.path} was opened vocab-only`);
    }
    if (tokens.length === 0) throw new LlamaRefError("llama_ref_bad_input", "no tokens");
    if (!Number.isSafeInteger(start) || start < 0) {
      throw new LlamaRefError("llama_ref_bad_input", `start position ${start}`);
    }
    this.#checkIds(tokens, extra);
    let ctx = this.#contexts.get(kind);
    if (ctx === undefined) {
      ctx = this.#createContext(model, kind);
      this.#contexts.set(kind, ctx);
    }
    this.#sym.llama_memory_clear(this.#sym.llama_get_memory(ctx), true);
    return ctx;
  }

  #createContext(model: Ptr, kind: ContextKind): Ptr {
    const threads = this.#options.threads ?? DEFAULT_THREADS;
    const kType = this.#options.kvType ?? "f16";
    const params = contextParams(this.#sym, this.contextLength, threads, kind, {
      k: kType,
      v: this.#options.vType ?? kType,
      rotate: this.#options.rotateQuantizedKv ?? true,
    });
    const ctx = this.#sym.llama_init_from_model(model, params);
    if (ctx === null) {
      throw new LlamaRefError(
        "llama_ref_load",
        `llama.cpp made no context for ${this.path}: ${this.#lib.takeLog()}`,
      );
    }
    if (!this.#options.spin) {
      const pool = this.#lib.sleepingThreadpool(threads);
      this.#threadpools.push(pool);
      this.#sym.llama_attach_threadpool(ctx, pool, pool);
    }
    return ctx;
  }

  #decode(ctx: Ptr, tokens: readonly number[], start: number, allOutputs: boolean): void {
    const rc = decode(this.#sym, ctx, tokens, start, allOutputs);
    if (rc !== 0) {
      throw new LlamaRefError(
        "llama_ref_decode",
        `llama_decode of ${tokens.length} tokens at ${start} returned ${rc}: ${this.#lib.takeLog()}`,
      );
    }
  }
}

/** Opens `path` with llama.cpp (loading llama.cpp itself on first use). */
export async function openLlamaModel(
  path: string,
  options: LlamaOpenOptions = {},
): Promise<LlamaModel> {
  const n = options.contextLength;
  if (n !== undefined && (!Number.isSafeInteger(n) || n < 1)) {
    throw new LlamaRefError("llama_ref_bad_input", `contextLength must be >= 1, got ${n}`);
  }
  const lib = await llamaLibrary();
  const params = lib.symbols.llama_model_default_params();
  const view = checkedModelDefaults(params);
  view.setInt32(MODEL.n_gpu_layers, options.gpuLayers ?? 0, true);
  view.setUint8(MODEL.vocab_only, options.vocabOnly ? 1 : 0);
  lib.takeLog();
  const model = lib.symbols.llama_model_load_from_file(cString(path), params);
  if (model === null) {
    throw new LlamaRefError("llama_ref_load", `llama.cpp cannot load ${path}: ${lib.takeLog()}`);
  }
  return new LlamaModel(lib, model, path, options);
}
