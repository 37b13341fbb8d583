/**
 * Forced tool calls as grammar: a call is written in the model's own syntax (the one its
 * template reads back and the output parser extracts), its arguments valid under the
 * tool's parameter schema. Hermes (Qwen): `<tool_call>\n{"name": ..., "arguments": ...}
 * \n</tool_call>` blocks; Llama 3: `{"name": ..., "parameters": ...}` separated by `; `;
 * Mistral: `[TOOL_CALLS][{"name": ..., "arguments": ...}, ...]`.
 */

import type { ToolCallSyntax } from "../chat/mod.ts";
import {
  ConstraintError,
  gbnfLiteral,
  type GrammarPart,
  toolArgumentsPart,
  type ToolConstraint,
} from "../constrain/mod.ts";

export interface CallGrammar {
  parts: GrammarPart[];
  /** A GBNF expression over the parts' rules: the calls. */
  expression: string;
  /** Control tokens the grammar writes as text. */
  preserved: string[];
}

interface Syntax {
  call: (name: string, args: string) => string;
  open: string;
  separator: string;
  close: string;
  preserved: string[];
}

const lit = gbnfLiteral;

const SYNTAXES: Record<Exclude<ToolCallSyntax, "none">, Syntax> = {
  hermes: {
    call: (name, args) =>
      `${lit(`<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": `)} ${args} ${
        lit("}\n</tool_call>")
      }`,
    open: "",
    separator: lit("\n"),
    close: "",
    preserved: [],
  },
  llama3: {
    call: (name, args) =>
      `${lit(`{"name": ${JSON.stringify(name)}, "parameters": `)} ${args} ${lit("}")}`,
    open: "",
    separator: lit("; "),
    close: "",
    preserved: [],
  },
  mistral: {
    call: (name, args) =>
      `${lit(`{"name": ${JSON.stringify(name)}, "arguments": `)} ${args} ${lit("}")}`,
    open: lit("[TOOL_CALLS]["),
    separator: lit(", "),
    close: lit("]"),
    preserved: ["[TOOL_CALLS]"],
  },
};

/** The grammar of one call (or, when parallel, one or more) of `tools` in `syntax`. */
export function callGrammar(syntax: ToolCallSyntax, tools: ToolConstraint): CallGrammar {
  if (syntax === "none") {
    throw new ConstraintError(
      "unsupported_schema",
      "tool calls cannot be forced: this model's chat template has no tool-call syntax",
    );
  }
  const s = SYNTAXES[syntax];
  const parts = tools.tools.map((t, i) => toolArgumentsPart(t, `a${i}-`));
  const one = `(${tools.tools.map((t, i) => s.call(t.name, `a${i}-root`)).join(" | ")})`;
  const calls = tools.parallel ? `${one} (${s.separator} ${one})*` : one;
  const expression = [s.open, calls, s.close].filter((x) => x !== "").join(" ");
  return { parts, expression: `(${expression})`, preserved: s.preserved };
}
