/**
 * JSON objects under `properties`, `required` and `additionalProperties`. Declared
 * properties come in declaration order, required ones first; optional ones may be left
 * out; extra properties (when `additionalProperties` allows them) come last, under keys
 * that cannot spell a declared one. The comma before an item depends on whether one came
 * before it, so the rules run over (item, something-written-yet) pairs: linear in the
 * number of properties.
 */

import { ConstraintError } from "./errors.ts";
import { gbnfLiteral } from "./gbnf_text.ts";
import type { SchemaRules } from "./json_rules.ts";

export interface ObjectShape {
  properties?: unknown;
  required?: unknown;
  additionalProperties?: unknown;
}

type Item = { kind: "required" | "optional"; kv: string } | { kind: "extra"; kv: string };

export function objectRule(
  c: SchemaRules,
  schema: ObjectShape,
  where: string,
  hint: string,
): string {
  const props = schema.properties ?? {};
  if (props === null || typeof props !== "object" || Array.isArray(props)) {
    throw new ConstraintError("invalid_schema", `${where}/properties: must be an object`);
  }
  const required = schema.required ?? [];
  if (!Array.isArray(required) || required.some((r) => typeof r !== "string")) {
    throw new ConstraintError("invalid_schema", `${where}/required: must be a list of names`);
  }
  const extra = schema.additionalProperties;
  if (
    extra !== undefined && typeof extra !== "boolean" &&
    (extra === null || typeof extra !== "object" || Array.isArray(extra))
  ) {
    throw new ConstraintError(
      "invalid_schema",
      `${where}/additionalProperties: must be a boolean or a schema`,
    );
  }
  const names = Object.keys(props);
  // No declared properties and nothing said about others: any object, as the schema allows.
  if (names.length === 0 && extra === undefined && required.length === 0) {
    return c.primitive("object");
  }
  const sp = c.primitive("space");
  const kv = (name: string, value: string): string =>
    `${gbnfLiteral(JSON.stringify(name))} ${sp} ":" ${sp} ${value}`;
  const valueOf = (name: string): string =>
    c.visit(
      (props as Record<string, unknown>)[name],
      c.pointer(`${where}/properties`, name),
      `${hint}-${name}`,
    );

  const requiredSet = new Set(required as string[]);
  const extraAllowed = extra !== undefined && extra !== false;
  for (const name of requiredSet) {
    if (!names.includes(name) && !extraAllowed) {
      throw new ConstraintError(
        "invalid_schema",
        `${where}/required: '${name}' is required but not among the properties, and ` +
          "additionalProperties does not allow it",
      );
    }
  }
  const items: Item[] = [];
  for (const name of required as string[]) {
    const value = names.includes(name)
      ? valueOf(name)
      : c.visit(extra === true ? true : extra, `${where}/additionalProperties`, `${hint}-extra`);
    items.push({ kind: "required", kv: c.rule(`${hint}-${name}-kv`, kv(name, value)) });
  }
  for (const name of names) {
    if (requiredSet.has(name)) continue;
    items.push({ kind: "optional", kv: c.rule(`${hint}-${name}-kv`, kv(name, valueOf(name))) });
  }
  if (extraAllowed) {
    const value = c.visit(
      extra === true ? true : extra,
      `${where}/additionalProperties`,
      `${hint}-extra`,
    );
    const key = c.otherKey([...names, ...(required as string[])]);
    items.push({ kind: "extra", kv: c.rule(`${hint}-extra-kv`, `${key} ":" ${sp} ${value}`) });
  }

  // rest(i, wrote): the items from i on, after something (or nothing) was written.
  const memo = new Map<string, string>();
  const rest = (i: number, wrote: boolean): string => {
    if (i === items.length) return '""';
    const key = `${i}:${wrote}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    const item = items[i];
    const lead = wrote ? `"," ${sp} ` : "";
    let body: string;
    if (item.kind === "required") {
      body = `${lead}${item.kv} ${rest(i + 1, true)}`;
    } else if (item.kind === "optional") {
      body = `${lead}${item.kv} ${rest(i + 1, true)} | ${rest(i + 1, wrote)}`;
    } else {
      // Written as the loop `(, kv)*` so that it comes back to the same parser state.
      body = wrote ? `("," ${sp} ${item.kv})*` : `(${item.kv} ("," ${sp} ${item.kv})*)?`;
    }
    const name = c.rule(`${hint}-rest-${i}${wrote ? "-w" : ""}`, body);
    memo.set(key, name);
    return name;
  };
  return c.rule(hint, `"{" ${sp} ${rest(0, false)} "}" ${sp}`);
}
