/**
 * One request's output pipeline, fed the engine's sampled tokens in order:
 *   token -> stop token? -> detokenize (whole characters) -> stop strings
 *         -> reasoning / tool-call parser -> generation events
 * A stop string that completes ends the sequence (the engine asks `token`'s answer).
 * Control tokens show no text, except those the tool-call reader needs to see
 * (`<|python_tag|>`, `[TOOL_CALLS]`), as llama-server shows its preserved tokens. An echoed
 * prompt goes first, scored when the engine scores it.
 */

import type { OutputParser } from "../chat/mod.ts";
import type {
  EngineFinish,
  SampledToken,
  SequenceObserver,
  TokenCounts,
  TokenEnd,
} from "../engine/mod.ts";
import { IncrementalDetokenizer, type Tokenizer } from "../tokenizer/mod.ts";
import type { GeneratedToken, GenerationEvent, UsageCounts } from "./events.ts";
import { StopMatcher } from "./stop.ts";

export interface RequestOutputOptions {
  /** Control tokens whose text goes to the parser. */
  preserved?: ReadonlySet<number>;
  /** The id of a tool call the model wrote without one, where the format wants a form. */
  newToolCallId?: () => string;
  /** The generation ends once this many tool calls were read. */
  maxToolCalls?: number;
  /** Which choice of its request this is (its events say so); usage counts the prompt in 0. */
  choice?: number;
  /** The prompt to hand back first (`echo`); `scored`: the engine reports its log-probs. */
  echo?: { text: string; ids: readonly number[]; scored: boolean };
}

export class RequestOutput implements SequenceObserver {
  readonly #tokenizer: Tokenizer;
  readonly #detok: IncrementalDetokenizer;
  readonly #stop: StopMatcher;
  readonly #parser: OutputParser | null;
  readonly #sink: (event: GenerationEvent) => void;
  readonly #preserved: ReadonlySet<number>;
  readonly #newToolCallId: (() => string) | undefined;
  readonly #maxToolCalls: number;
  readonly #choice: number;
  #echo: NonNullable<RequestOutputOptions["echo"]> | null;
  #reasoningTokens = 0;
  #toolCalls = 0;
  // Text after a stop string is never shown, held-back bytes included.
  #stopStringHit = false;

  constructor(
    tokenizer: Tokenizer,
    parser: OutputParser | null,
    stops: readonly string[],
    sink: (event: GenerationEvent) => void,
    options: RequestOutputOptions = {},
  ) {
    this.#tokenizer = tokenizer;
    this.#preserved = options.preserved ?? new Set();
    this.#newToolCallId = options.newToolCallId;
    this.#maxToolCalls = options.maxToolCalls ?? Infinity;
    this.#detok = new IncrementalDetokenizer(tokenizer);
    this.#stop = new StopMatcher(stops);
    this.#parser = parser;
    this.#choice = options.choice ?? 0;
    this.#sink = this.#choice === 0 ? sink : (e) => sink({ ...e, choice: this.#choice });
    this.#echo = options.echo ?? null;
  }

  /** The scored prompt (the engine's, when `echo.scored`): handed back as the echo. */
  prompt(scored: SampledToken[]): void {
    const echo = this.#echo;
    if (echo === null) return;
    this.#echo = null;
    this.#sink({
      type: "prompt",
      text: echo.text,
      tokens: echo.ids.map((id, i) => i === 0 ? this.#info(id) : this.#info(id, scored[i - 1])),
    });
  }

  /** An echo nobody scores goes before the first thing the choice says. */
  #unscoredEcho(): void {
    if (this.#echo !== null && !this.#echo.scored) this.prompt([]);
  }

  /** A token as the events show it; with its log-probs when `sampled` has them. */
  #info(id: number, sampled?: SampledToken, topLogits?: Array<[number, number]>): GeneratedToken {
    const bytesOf = (t: number): Uint8Array => this.#tokenizer.tokenBytes(t, true).slice();
    return {
      id,
      bytes: bytesOf(id),
      ...(sampled?.logprob !== undefined ? { logprob: sampled.logprob } : {}),
      ...(sampled?.top
        ? { top: sampled.top.map((t) => ({ id: t.id, bytes: bytesOf(t.id), logprob: t.logprob })) }
        : {}),
      ...(topLogits ? { topLogits } : {}),
    };
  }

  token(
    sampled: SampledToken,
    topLogits: Array<[number, number]> | undefined,
    end: TokenEnd,
  ): boolean {
    this.#unscoredEcho();
    const info = this.#info(sampled.id, sampled, topLogits);
    if (this.#parser?.inReasoning) this.#reasoningTokens++;
    // A stop token ends the text: it shows none of its own.
    if (end === "stop_token") {
      this.#emitText("", [info]);
      return false;
    }
    const stop = this.#stop.push(this.#text(sampled.id));
    this.#emitText(stop.text, [info]);
    this.#stopStringHit = stop.stopped;
    return stop.stopped || this.#toolCalls >= this.#maxToolCalls;
  }

  /** The text a token adds; a preserved control token ends any partial character first. */
  #text(id: number): string {
    if (!this.#preserved.has(id)) return this.#detok.push(id);
    const piece = new TextDecoder().decode(this.#tokenizer.tokenBytes(id, true));
    return this.#detok.finish() + piece;
  }

  /** Flushes held text (unless cancelled) and reports the end with usage. */
  finished(reason: EngineFinish, counts: TokenCounts): void {
    if (reason !== "cancelled") {
      this.#unscoredEcho();
      const tail = this.#stopStringHit
        ? ""
        : this.#stop.push(this.#detok.finish()).text + this.#stop.finish();
      this.#emitText(tail, [], true);
    }
    this.#sink({
      type: "done",
      finishReason: reason === "stop" && this.#toolCalls > 0 ? "tool_calls" : reason,
      usage: this.#usage(counts),
    });
  }

  failed(code: string, message: string, counts: TokenCounts): void {
    this.#sink({
      type: "done",
      finishReason: "error",
      usage: this.#usage(counts),
      fault: { code, message },
    });
  }

  /** The choice's usage: its tokens, and the prompt where it is the first choice. */
  #usage(counts: TokenCounts): UsageCounts {
    const usage = { ...counts, reasoningTokens: this.#reasoningTokens };
    return this.#choice === 0 ? usage : { ...usage, promptTokens: 0, cachedTokens: 0 };
  }

  /** Routes text through the output parser and emits what it yields. */
  #emitText(text: string, tokens: GeneratedToken[], final = false): void {
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
          this.#toolCalls++;
          const id = e.call.id ?? this.#newToolCallId?.();
          this.#sink({
            type: "tool_call",
            name: e.call.name,
            arguments: e.call.arguments,
            ...(id === undefined ? {} : { id }),
          });
        } else if (e.kind === "reasoning") {
          reasoning += e.text;
        } else {
          content += e.text;
        }
      }
    }
    this.#flush(reasoning, content, tokens);
  }

  #flush(reasoning: string, content: string, tokens: GeneratedToken[]): void {
    if (reasoning === "" && content === "" && tokens.length === 0) return;
    this.#sink({
      type: "delta",
      ...(reasoning ? { reasoning } : {}),
      ...(content ? { content } : {}),
      tokens,
    });
  }
}
