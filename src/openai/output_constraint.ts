/**
 * Structured-output fields of the three routes, turned into one OutputConstraint (or
 * none) and checked on the spot: chat's `response_format` (`json_object`, `json_schema`),
 * llama-server's `grammar` (GBNF) and `json_schema`, the Responses API's `text.format`,
 * and the tool choice (`required`, a named function, `parallel_tool_calls`). A grammar or
 * schema that is malformed, or uses what cannot be enforced, is a 400 naming the field and
 * the place inside it.
 */

import { z } from "zod";
import type { ChatTool } from "../chat/mod.ts";
import {
  checkConstraint,
  ConstraintError,
  type OutputConstraint,
  type TextConstraint,
} from "../constrain/mod.ts";
import { OpenAiError, unsupported } from "./errors.ts";

const SchemaObject = z.record(z.string(), z.unknown());

export const ResponseFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object"), schema: SchemaObject.nullish() }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: z.string().nullish(),
      description: z.string().nullish(),
      schema: SchemaObject.nullish(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/** The Responses API's `text.format`: the same formats, the schema's fields flattened. */
export const TextFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().nullish(),
    description: z.string().nullish(),
    schema: SchemaObject.nullish(),
    strict: z.boolean().nullish(),
  }),
]);

export type ToolChoice =
  | "none"
  | "auto"
  | "required"
  | { name: string }
  | null
  | undefined;

/** A text constraint and the request field it came from. */
export interface TextSource {
  text: TextConstraint;
  field: string;
}

/** `response_format` (chat, completions) as a text constraint. */
export function responseFormatText(
  format: z.infer<typeof ResponseFormat> | null | undefined,
): TextSource | undefined {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") {
    return format.schema
      ? { text: { kind: "json", schema: format.schema }, field: "response_format.schema" }
      : { text: { kind: "json" }, field: "response_format" };
  }
  const schema = format.json_schema.schema;
  return schema
    ? { text: { kind: "json", schema }, field: "response_format.json_schema.schema" }
    : { text: { kind: "json" }, field: "response_format.json_schema" };
}

/** `text.format` (responses) as a text constraint. */
export function textFormatText(
  format: z.infer<typeof TextFormat> | null | undefined,
): TextSource | undefined {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object" || !format.schema) {
    return { text: { kind: "json" }, field: "text.format" };
  }
  return { text: { kind: "json", schema: format.schema }, field: "text.format.schema" };
}

/** llama-server's `grammar` and `json_schema`, and one text constraint at most in all. */
export function pickText(
  sources: Array<TextSource | undefined>,
  extensions: { grammar?: string | null; json_schema?: Record<string, unknown> | null },
): TextSource | undefined {
  const all = [...sources];
  if (extensions.grammar != null) {
    all.push({ text: { kind: "grammar", gbnf: extensions.grammar }, field: "grammar" });
  }
  if (extensions.json_schema != null) {
    all.push({ text: { kind: "json", schema: extensions.json_schema }, field: "json_schema" });
  }
  const given = all.filter((s) => s !== undefined);
  if (given.length > 1) {
    throw unsupported(
      given[1].field,
      `${given.map((s) => s.field.split(".")[0]).join(" and ")} cannot be given together: ` +
        "the output can follow one of them",
    );
  }
  return given[0];
}

export interface StructuredOutput {
  constraint?: OutputConstraint;
  /** `parallel_tool_calls: false` with calls left to the model. */
  maxToolCalls?: number;
}

/**
 * The request's constraint from its text constraint and tool choice over `tools` (those
 * offered after the choice; `indexOf` gives a tool's index in the request, for messages).
 * Every grammar and schema is compiled here: a bad one is a 400.
 */
export function structuredOutput(
  text: TextSource | undefined,
  tools: ChatTool[],
  choice: ToolChoice,
  parallel: boolean | null | undefined,
  toolField: (tool: ChatTool) => string,
): StructuredOutput {
  const forced = choice === "required" || (choice != null && typeof choice === "object");
  const specs = tools.map((t) => ({
    name: t.function.name,
    ...(t.function.parameters ? { parameters: t.function.parameters } : {}),
  }));
  const constraint: OutputConstraint = {};
  if (text) constraint.text = text.text;
  if (forced || (text && tools.length > 0)) {
    constraint.tools = {
      tools: specs,
      mode: forced ? "required" : "optional",
      parallel: typeof choice === "object" && choice !== null ? false : parallel !== false,
    };
  }
  const out: StructuredOutput = {};
  if (constraint.text || constraint.tools) {
    try {
      checkConstraint(constraint, {
        text: text?.field ?? "",
        tool: (i) => toolField(tools[i]),
      });
    } catch (err) {
      if (!(err instanceof ConstraintError)) throw err;
      const field = err.message.slice(0, err.message.indexOf(":"));
      throw new OpenAiError("invalid_request", err.message, field || null);
    }
    out.constraint = constraint;
  }
  if (!forced && parallel === false && tools.length > 0) out.maxToolCalls = 1;
  return out;
}

/**
 * A constraint follows one sequence's tokens; the `n` choices of a request fork from one
 * prompt and would share it, so a constrained request asks for one choice.
 */
export function checkChoices(n: number, structured: StructuredOutput): void {
  if (n > 1 && structured.constraint) {
    throw new OpenAiError(
      "invalid_request",
      `n = ${n} with a constrained output (response_format, grammar, json_schema or a ` +
        "required tool call) is not supported: ask for one choice",
      "n",
    );
  }
}
