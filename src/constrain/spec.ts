/**
 * What a request asks its output to be, as plain data (it crosses from the HTTP thread to
 * the model's Worker): text matching a GBNF grammar or JSON (any object, or valid under a
 * schema), and/or tool calls in the model's own syntax. `grammarParts` turns the text part
 * into grammar sources; `checkConstraint` compiles everything a request brings once, so
 * that a bad grammar or schema is refused (400) before the request is queued.
 */

import { ConstraintError } from "./errors.ts";
import { addGbnf } from "./gbnf.ts";
import { GrammarBuilder } from "./grammar.ts";
import { jsonObjectGrammar, jsonSchemaGrammar } from "./json_schema.ts";

export type TextConstraint =
  | { kind: "grammar"; gbnf: string }
  /** `schema` absent: any JSON object (JSON mode). */
  | { kind: "json"; schema?: unknown };

export interface ToolSpec {
  name: string;
  /** The JSON schema of its arguments; absent: any object. */
  parameters?: unknown;
}

export interface ToolConstraint {
  tools: ToolSpec[];
  /** `required`: the answer is tool calls; `optional`: text or tool calls. */
  mode: "required" | "optional";
  /** More than one call may be made. */
  parallel: boolean;
}

export interface OutputConstraint {
  text?: TextConstraint;
  tools?: ToolConstraint;
}

/** One source of a joined grammar: GBNF text whose rules all get `prefix`. */
export interface GrammarPart {
  gbnf: string;
  prefix: string;
}

/** The text constraint as a grammar part whose root is `<prefix>root`. */
export function textGrammarPart(text: TextConstraint, prefix: string): GrammarPart {
  if (text.kind === "grammar") return { gbnf: text.gbnf, prefix };
  const gbnf = text.schema === undefined ? jsonObjectGrammar() : jsonSchemaGrammar(text.schema);
  return { gbnf, prefix };
}

/** A tool's arguments as a grammar part whose root is `<prefix>root`. */
export function toolArgumentsPart(tool: ToolSpec, prefix: string): GrammarPart {
  const schema = tool.parameters ?? { type: "object" };
  return { gbnf: jsonSchemaGrammar(schema), prefix };
}

/** Joins parts and a root rule's GBNF body (over the parts' prefixed rules) into a builder. */
export function joinParts(parts: readonly GrammarPart[], root: string): GrammarBuilder {
  const builder = new GrammarBuilder();
  for (const part of parts) addGbnf(builder, part.gbnf, part.prefix, "root");
  addGbnf(builder, `root ::= ${root}\n`, "", "root", true);
  return builder;
}

/** Where a problem stands, for the message: the request field that brought it. */
export interface ConstraintFields {
  text: string;
  tool: (index: number) => string;
}

/**
 * Compiles every grammar and schema `constraint` brings; throws ConstraintError, its
 * message starting with the request field at fault.
 */
export function checkConstraint(constraint: OutputConstraint, fields: ConstraintFields): void {
  const at = (field: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      if (!(err instanceof ConstraintError)) throw err;
      throw new ConstraintError(err.code, `${field}: ${err.message}`);
    }
  };
  if (constraint.text !== undefined) {
    const text = constraint.text;
    at(fields.text, () => {
      const part = textGrammarPart(text, "t-");
      joinParts([part], "t-root").build();
    });
  }
  constraint.tools?.tools.forEach((tool, i) =>
    at(fields.tool(i), () => {
      joinParts([toolArgumentsPart(tool, "a-")], "a-root").build();
    })
  );
}
