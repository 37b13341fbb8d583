/**
 * The streaming parser of a model's output: fed one decoded piece at a time, it emits
 * reasoning text, content text and complete tool calls. Reasoning is split off first
 * (reasoning.ts); the rest is read for tool calls in the model's syntax (format.ts) when
 * tool calling is on. Whitespace around tool calls is not content. Text that only looked
 * like a call (bad JSON, unknown form, never closed) is passed through as content, markers
 * and all. However the output is cut into pieces, the events add up to the same result.
 */

import type { ToolCallSyntax } from "./format.ts";
import { HermesCalls } from "./hermes_calls.ts";
import { Llama3Calls } from "./llama3_calls.ts";
import type { ChatTool } from "./messages.ts";
import { MistralCalls } from "./mistral_calls.ts";
import { ReasoningSplitter } from "./reasoning.ts";
import { pushText, type TextEvent } from "./tags.ts";
import type { OutputEvent, ToolCallScanner } from "./tool_call_scanner.ts";
import type { ParsedToolCall } from "./tool_calls.ts";

export type { OutputEvent } from "./tool_call_scanner.ts";

export interface OutputParserOptions {
  /** Split `<think>…</think>` into reasoning (default true). */
  reasoning?: boolean;
  /** The prompt already opened `<think>`: output starts as reasoning. */
  startInReasoning?: boolean;
  /** Extract tool calls (default false: the request had no tools). */
  toolCalls?: boolean;
  /** How the model writes them (default Hermes `<tool_call>` blocks). */
  syntax?: ToolCallSyntax;
  /** The request's tools; lets XML parameters declared as strings stay strings. */
  tools?: readonly ChatTool[];
}

/** A whole output, parsed. */
export interface ParsedOutput {
  reasoning: string;
  content: string;
  toolCalls: ParsedToolCall[];
}

function scanner(options: OutputParserOptions): ToolCallScanner | null {
  if (!options.toolCalls) return null;
  switch (options.syntax ?? "hermes") {
    case "hermes":
      return new HermesCalls(options.tools);
    case "llama3":
      return new Llama3Calls(options.tools);
    case "mistral":
      return new MistralCalls();
    case "none":
      return null;
  }
}

export class OutputParser {
  readonly #reasoning: ReasoningSplitter | null;
  readonly #calls: ToolCallScanner | null;

  constructor(options: OutputParserOptions = {}) {
    this.#reasoning = options.reasoning === false
      ? null
      : new ReasoningSplitter({ startInReasoning: options.startInReasoning });
    this.#calls = scanner(options);
  }

  /** True while the model is producing reasoning. */
  get inReasoning(): boolean {
    return this.#reasoning?.inReasoning ?? false;
  }

  /** Feeds one piece of decoded output; returns what became certain. */
  push(piece: string): OutputEvent[] {
    return this.#route(piece, false);
  }

  /** Ends the output; returns everything still held back. */
  finish(): OutputEvent[] {
    return this.#route("", true);
  }

  #route(piece: string, final: boolean): OutputEvent[] {
    const split: TextEvent[] = [];
    if (this.#reasoning === null) pushText(split, "content", piece);
    else if (final) this.#reasoning.finish(split);
    else this.#reasoning.push(piece, split);

    const events: OutputEvent[] = [];
    for (const event of split) {
      if (event.kind === "reasoning") events.push(event);
      else this.#content(event.text, events, false);
    }
    if (final) this.#content("", events, true);
    return events;
  }

  #content(text: string, events: OutputEvent[], final: boolean): void {
    if (this.#calls === null) pushText(events, "content", text);
    else this.#calls.push(text, events, final);
  }
}

/** Parses a complete output at once (the non-streaming path). */
export function parseOutput(text: string, options: OutputParserOptions = {}): ParsedOutput {
  const parser = new OutputParser(options);
  return collect([...parser.push(text), ...parser.finish()]);
}

/** Folds events into one result. */
export function collect(events: readonly OutputEvent[]): ParsedOutput {
  const out: ParsedOutput = { reasoning: "", content: "", toolCalls: [] };
  for (const e of events) {
    if (e.kind === "tool_call") out.toolCalls.push(e.call);
    else if (e.kind === "reasoning") out.reasoning += e.text;
    else out.content += e.text;
  }
  return out;
}
