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
  readonly prompt: Int32Array;
  readonly maxNew: number;
  readonly sampler: Sampler;
  /** Raw top logits to report per step (0 = none). */
  readonly topLogits: number;
  /** Tokens whose K/V are in the cache. */
  cached = 0;
  /** The last sampled token, fed at the next step. */
  pending = -1;
  generated = 0;
  reasoningTokens = 0;
  blockTable: Int32Array | null = null;
  finished = false;
  cancelled = false;

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
    prompt: Int32Array,
    maxNew: number,
    tokenizer: Tokenizer,
    vocabSize: number,
    parser: OutputParser | null,
    sink: EventSink,
  ) {
    this.id = request.id;
    this.prompt = prompt;
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

  /** Positions this sequence needs in the cache at most. */
  get maxPositions(): number {
    return this.prompt.length + this.maxNew;
  }

  get prefilling(): boolean {
    return this.cached < this.prompt.length;
  }

  /** Handles a sampled token; returns true when the sequence is finished. */
  onToken(sampled: SampledToken, topLogits: Array<[number, number]> | undefined): boolean {
    const id = sampled.id;
    this.sampler.accept(id);
    this.generated++;
    this.pending = id;
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
        promptTokens: this.prompt.length,
        completionTokens: this.generated,
        cachedTokens: 0,
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
