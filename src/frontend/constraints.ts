/**
 * A request's output constraint turned into the engine's token filter: the grammar
 * joined from its text part (a GBNF grammar, JSON mode or a schema) and its forced tool
 * calls (tool_call_grammar.ts), compiled once per source and vocabulary (the compiler's
 * cache), matched per sequence. On a thinking model the constraint starts after the
 * reasoning block: the one the prompt opened, or one the output opens first.
 */

import { type ChatFormat, THINK_CLOSE, THINK_OPEN } from "../chat/mod.ts";
import {
  buildTokenTrie,
  ConstraintCompiler,
  GrammarMatcher,
  type GrammarPart,
  type OutputConstraint,
  type ReasoningTokens,
  textGrammarPart,
} from "../constrain/mod.ts";
import type { TokenFilter } from "../engine/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import { callGrammar } from "./tool_call_grammar.ts";

export class Constraints {
  readonly #tokenizer: Tokenizer;
  readonly #format: ChatFormat;
  /** Compilers per set of control tokens written as text ("" = none). */
  readonly #compilers = new Map<string, ConstraintCompiler>();

  constructor(tokenizer: Tokenizer, format: ChatFormat) {
    this.#tokenizer = tokenizer;
    this.#format = format;
  }

  /**
   * The filter for `constraint`, or undefined when it leaves the output free (tools the
   * model may call or not, and no text constraint). `prompt` is the rendered prompt when
   * the output is read for reasoning.
   */
  filter(constraint: OutputConstraint, reasoningPrompt: string | null): TokenFilter | undefined {
    const parts: GrammarPart[] = [];
    const alternatives: string[] = [];
    const tools = constraint.tools;
    const toolsOnly = tools?.mode === "required";
    if (constraint.text !== undefined && !toolsOnly) {
      parts.push(textGrammarPart(constraint.text, "t-"));
      alternatives.push("t-root");
    }
    let preserved: string[] = [];
    if (tools !== undefined && (toolsOnly || alternatives.length > 0)) {
      const calls = callGrammar(this.#format.toolCalls, tools);
      parts.push(...calls.parts);
      alternatives.push(calls.expression);
      preserved = calls.preserved;
    }
    if (alternatives.length === 0) return undefined;
    const masks = this.#compiler(preserved).compile(parts, alternatives.join(" | "));
    return new GrammarMatcher(masks, this.#tokenizer.eogIds, this.#reasoning(reasoningPrompt));
  }

  #reasoning(prompt: string | null): ReasoningTokens | undefined {
    if (prompt === null) return undefined;
    const open = this.#tokenizer.tokenId(THINK_OPEN);
    const close = this.#tokenizer.tokenId(THINK_CLOSE);
    if (open === undefined || close === undefined) return undefined;
    const lastOpen = prompt.lastIndexOf(THINK_OPEN);
    const lastClose = prompt.lastIndexOf(THINK_CLOSE);
    const startInside = lastOpen >= 0 && lastClose < lastOpen;
    // A block the prompt closed at its very end (thinking turned off) is not reopened.
    const closedAtEnd = lastClose >= 0 && lastClose > lastOpen &&
      prompt.slice(lastClose + THINK_CLOSE.length).trim() === "";
    return { open, close, startInside, mayOpen: !startInside && !closedAtEnd };
  }

  #compiler(preserved: readonly string[]): ConstraintCompiler {
    const key = preserved.join("\0");
    let compiler = this.#compilers.get(key);
    if (compiler === undefined) {
      const tok = this.#tokenizer;
      const keep = new Set(preserved.map((t) => tok.tokenId(t)));
      const pieces = Array.from({ length: tok.size }, (_, id) => {
        if (keep.has(id)) return tok.tokenBytes(id, true);
        return tok.isControl(id) ? new Uint8Array(0) : tok.tokenBytes(id, false);
      });
      compiler = new ConstraintCompiler(buildTokenTrie(pieces));
      this.#compilers.set(key, compiler);
    }
    return compiler;
  }
}
