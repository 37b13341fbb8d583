/**
 * One request inside the engine: its prompt, its place in the KV cache, and the pipeline
 * that turns each sampled token into events:
 *   token -> end-of-generation? -> detokenize (whole characters) -> stop strings
 *         -> reasoning / tool-call parser -> delta events
 */

import type { OutputParser } from "../chat/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { IncrementalDetokenizer } from "../tokenizer/mod.ts";
import type { EngineEvent, FinishReason, GenerateRequest, TokenInfo } from "./protocol.ts";
import { type SampledToken, Sampler } from "./sampler.ts";
import { StopMatcher } from "./stop.ts";

export type EventSink = (event: EngineEvent) => void;

export class Sequence {
  readonly id: string;
  /** Prompt then generated tokens: everything this sequence's cache positions hold. */
  readonly tokens: number[];
  readonly promptLength: number;
  readonly maxNew: number;
  readonly sampler: Sampler;
  /** Raw top logits to report per step (0 = none). */
  readonly topLogits: number;
  /** Leading tokens whose K/V are in the cache. */
  cached = 0;
  /** Cache blocks, in position order. */
  blocks: number[] = [];
  /** Content keys of the leading full blocks already registered for prefix reuse. */
  keys: string[] = [];
  /** Prompt tokens served from the prefix cache at first admission. */
  reusedTokens = -1;
  /**
   * How much of the prompt a later request may reuse to the token (the block it ends in is
   * registered by its first tokens too): the whole prompt, or for a chat prompt up to one
   * past its last `<|im_start|>`, where the next turn's re-rendered history may start to
   * differ (the engine sets it).
   */
  reuseBoundary: number;
  generated = 0;
  reasoningTokens = 0;
  finished = false;

  readonly #request: GenerateRequest;
  readonly #tokenizer: Tokenizer;
  readonly #detok: IncrementalDetokenizer;
  readonly #stop: StopMatcher;
  readonly #parser: OutputParser | null;
  readonly #sink: EventSink;
  #madeToolCall = false;
  // Text after a stop string is never shown, held-back bytes included.
  #stopStringHit = false;

  constructor(
    request: GenerateRequest,
    prompt: ArrayLike<number>,
    maxNew: number,
    tokenizer: Tokenizer,
    vocabSize: number,
    parser: OutputParser | null,
    sink: EventSink,
  ) {
    this.id = request.id;
    this.tokens = Array.from(prompt);
    this.promptLength = prompt.length;
    this.reuseBoundary = prompt.length;
    this.maxNew = maxNew;
    this.topLogits = request.topLogits ?? 0;
    this.#request = request;
    this.#tokenizer = tokenizer;
    this.sampler = new Sampler(request.sampling, vocabSize, prompt);
    this.#detok = new IncrementalDetokenizer(tokenizer);
    this.#stop = new StopMatcher(request.stop ?? []);
    this.#parser = parser;
    this.#sink = sink;
  }

  /** Tokens not yet in the cache: the rest of the prompt, or the last sampled token. */
  get uncached(): number {
    return this.tokens.length - this.cached;
  }

  /** Still working through its prompt (or recomputing after preemption). */
  get prefilling(): boolean {
    return this.uncached > 1 || this.generated === 0;
  }

  /** Handles a sampled token; returns true when the sequence is finished. */
  onToken(sampled: SampledToken, topLogits: Array<[number, number]> | undefined): boolean {
    const id = sampled.id;
    this.sampler.accept(id);
    this.generated++;
    this.tokens.push(id);
    const bytesOf = (t: number): number[] => Array.from(this.#tokenizer.tokenBytes(t, true));
    const info: TokenInfo = {
      id,
      bytes: bytesOf(id),
      logprob: sampled.logprob,
      top: sampled.top?.map((t) => ({ id: t.id, bytes: bytesOf(t.id), logprob: t.logprob })),
      topLogits,
    };
    if (this.#parser?.inReasoning) this.reasoningTokens++;

    if (!this.#request.ignoreEos && this.#tokenizer.isEog(id)) {
      this.#emitText("", [info]);
      this.finish("stop");
      return true;
    }
    const stop = this.#stop.push(this.#detok.push(id));
    this.#emitText(stop.text, [info]);
    if (stop.stopped) {
      this.#stopStringHit = true;
      this.finish("stop");
      return true;
    }
    if (this.generated >= this.maxNew) {
      this.finish("length");
      return true;
    }
    return false;
  }

  /** Ends the sequence: flushes held text and reports usage. */
  finish(reason: FinishReason): void {
    if (this.finished) return;
    this.finished = true;
    if (reason !== "cancelled") {
      const tail = this.#stopStringHit
        ? ""
        : this.#stop.push(this.#detok.finish()).text + this.#stop.finish();
      this.#emitText(tail, [], true);
    }
    const finishReason = reason === "stop" && this.#madeToolCall ? "tool_calls" : reason;
    this.#sink({
      type: "done",
      id: this.id,
      finishReason,
      usage: {
        promptTokens: this.promptLength,
        completionTokens: this.generated,
        cachedTokens: Math.max(0, this.reusedTokens),
        reasoningTokens: this.reasoningTokens,
      },
    });
  }

  /** Ends the sequence with an error instead of a finish reason. */
  fail(code: string, message: string): void {
    if (this.finished) return;
    this.finished = true;
    this.#sink({ type: "error", id: this.id, code, message });
  }

  /** Routes text through the output parser and emits what it yields. */
  #emitText(text: string, tokens: TokenInfo[], final = false): void {
    let reasoning = "";
    let content = "";
    if (this.#parser === null) {
      content = text;
    } else {
      const events = this.#parser.push(text);
      if (final) events.push(...this.#parser.finish());
      for (const e of events) {
        if (e.kind === "tool_call") {
          this.#flush(reasoning, content, tokens);
          reasoning = content = "";
          tokens = [];
          this.#madeToolCall = true;
          this.#sink({ type: "tool_call", id: this.id, call: e.call });
        } else if (e.kind === "reasoning") {
          reasoning += e.text;
        } else {
          content += e.text;
        }
      }
    }
    this.#flush(reasoning, content, tokens);
  }

  #flush(reasoning: string, content: string, tokens: TokenInfo[]): void {
    if (reasoning === "" && content === "" && tokens.length === 0) return;
    this.#sink({
      type: "delta",
      id: this.id,
      ...(reasoning ? { reasoning } : {}),
      ...(content ? { content } : {}),
      tokens,
    });
  }
}
