/**
 * A JSON schema as a GBNF grammar whose sentences are JSON texts valid under it: OpenAI's
 * strict subset and the common keywords around it (json_strings.ts, json_numbers.ts for
 * the string and integer ones). Every keyword is either enforced or refused by name, with
 * the JSON pointer of where it stands: none is silently ignored (annotations aside). The
 * grammar may generate a subset of the valid documents (declared properties in order, no
 * properties beyond the declared ones unless `additionalProperties` asks for them), never
 * an invalid one. Whitespace between tokens is bounded as llama.cpp bounds it (`space`),
 * so a model cannot loop on blanks inside a structure.
 */

import { ConstraintError } from "./errors.ts";
import { gbnfClass, gbnfLiteral, JSON_PLAIN_EXCLUDED } from "./gbnf_text.ts";
import { integerRange } from "./json_numbers.ts";
import { CHAR_RULE, stringContent } from "./json_strings.ts";
import { objectRule, type ObjectShape } from "./json_objects.ts";
import { arrayRule } from "./json_arrays.ts";
import type { SchemaRules } from "./json_rules.ts";

const PRIMITIVES: Record<string, string> = {
  space: String.raw`| " " | "\n"{1,2} [ \t]{0,20}`,
  boolean: `("true" | "false") @space`,
  null: `"null" @space`,
  "integral-part": "[0] | [1-9] [0-9]{0,15}",
  "decimal-part": "[0-9]{1,16}",
  number: `("-"? @integral-part) ("." @decimal-part)? ([eE] [-+]? @integral-part)? @space`,
  integer: `("-"? @integral-part) @space`,
  char: CHAR_RULE,
  string: String.raw`"\"" @char* "\"" @space`,
  value: "@object | @array | @string | @number | @boolean | @null",
  object: String
    .raw`"{" @space (@string ":" @space @value ("," @space @string ":" @space @value)*)? "}" @space`,
  array: String.raw`"[" @space (@value ("," @space @value)*)? "]" @space`,
};

/** Keywords that say nothing about which documents are valid. */
const ANNOTATIONS = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "$defs",
  "definitions",
  "strict",
]);
const HANDLED = new Set([
  "type",
  "enum",
  "const",
  "anyOf",
  "allOf",
  "$ref",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
]);
const TYPES = ["string", "number", "integer", "boolean", "null", "object", "array"];

type Schema = Record<string, unknown>;

const isObject = (v: unknown): v is Schema =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** A JSON pointer's segment. */
const segment = (s: string | number): string => String(s).replace(/~/g, "~0").replace(/\//g, "~1");

/** GBNF for any JSON object (JSON mode), with its root rule `root`. */
export function jsonObjectGrammar(): string {
  const c = new SchemaConverter({});
  return c.finish(c.primitive("object"));
}

/** GBNF for the JSON texts valid under `schema`, with its root rule `root`. */
export function jsonSchemaGrammar(schema: unknown): string {
  if (schema !== true && !isObject(schema)) {
    throw new ConstraintError("invalid_schema", "#: a schema must be an object or true");
  }
  const c = new SchemaConverter(isObject(schema) ? schema : {});
  return c.finish(c.visit(schema, "#", "root-value"));
}

export class SchemaConverter implements SchemaRules {
  readonly #rules = new Map<string, string>();
  readonly #byBody = new Map<string, string>();
  readonly #refs = new Map<string, string>();
  readonly #root: Schema;

  constructor(root: Schema) {
    this.#root = root;
  }

  finish(expr: string): string {
    this.#rules.set("root", expr);
    return [...this.#rules].map(([name, body]) => `${name} ::= ${body}`).join("\n") + "\n";
  }

  /** A named rule with `body`; one with the same body already made is reused. */
  rule(hint: string, body: string): string {
    const known = this.#byBody.get(body);
    if (known !== undefined) return known;
    const base = hint.replace(/[^a-zA-Z0-9-]+/g, "-").replace(/^-+|-+$/g, "") || "r";
    let name = base;
    for (let i = 1; this.#rules.has(name) || name === "root"; i++) name = `${base}-${i}`;
    this.#rules.set(name, body);
    this.#byBody.set(body, name);
    return name;
  }

  /** A built-in rule (and the ones it uses). */
  primitive(name: string): string {
    if (!this.#rules.has(name)) {
      // Set first, so that a primitive that uses itself (value, object) stops here.
      this.#rules.set(name, "");
      this.#rules.set(
        name,
        PRIMITIVES[name].replace(/@([a-z-]+)/g, (_, used: string) => this.primitive(used)),
      );
    }
    return name;
  }

  /** The rule name or expression for values valid under `schema` at `where`. */
  visit(schema: unknown, where: string, hint: string): string {
    if (schema === true) return this.primitive("value");
    if (schema === false) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: the schema 'false' admits nothing`,
      );
    }
    if (!isObject(schema)) {
      throw new ConstraintError(
        "invalid_schema",
        `${where}: a schema must be an object or a boolean`,
      );
    }
    for (const key of Object.keys(schema)) {
      if (!HANDLED.has(key) && !ANNOTATIONS.has(key)) {
        throw new ConstraintError(
          "unsupported_schema",
          `${where}: the keyword '${key}' is not supported and would not be enforced`,
        );
      }
    }
    if (schema.$ref !== undefined) return this.#ref(schema, where);
    if (schema.allOf !== undefined) {
      if (!Array.isArray(schema.allOf) || schema.allOf.length !== 1) {
        throw new ConstraintError(
          "unsupported_schema",
          `${where}: allOf is supported with exactly one schema`,
        );
      }
      const { allOf, ...rest } = schema;
      return this.visit(this.#merge(rest, allOf[0], `${where}/allOf/0`), `${where}/allOf/0`, hint);
    }
    if (schema.const !== undefined) return this.#literals([schema.const]);
    if (schema.enum !== undefined) {
      if (!Array.isArray(schema.enum) || schema.enum.length === 0) {
        throw new ConstraintError("invalid_schema", `${where}/enum: must be a non-empty array`);
      }
      return this.#literals(schema.enum);
    }
    if (schema.anyOf !== undefined) {
      if (!Array.isArray(schema.anyOf) || schema.anyOf.length === 0) {
        throw new ConstraintError("invalid_schema", `${where}/anyOf: must be a non-empty array`);
      }
      const { anyOf, ...rest } = schema;
      const alts = anyOf.map((s, i) =>
        this.visit(
          this.#merge(rest, s, `${where}/anyOf/${i}`),
          `${where}/anyOf/${i}`,
          `${hint}-${i}`,
        )
      );
      return this.rule(hint, alts.join(" | "));
    }
    const types = this.#types(schema, where);
    if (types.length > 1) {
      return this.rule(
        hint,
        types.map((t) => this.visit({ ...schema, type: t }, where, `${hint}-${t}`)).join(" | "),
      );
    }
    return this.#typed(types[0], schema, where, hint);
  }

  /** `outer`'s keywords applied to `inner` too; refused where both say the same keyword. */
  #merge(outer: Schema, inner: unknown, where: string): unknown {
    const keys = Object.keys(outer).filter((k) => !ANNOTATIONS.has(k));
    if (keys.length === 0) return inner;
    if (!isObject(inner)) return inner === true ? outer : inner;
    const both = keys.filter((k) => k in inner && !ANNOTATIONS.has(k));
    if (both.length > 0) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: '${both[0]}' both here and beside the combinator cannot be enforced`,
      );
    }
    return { ...outer, ...inner };
  }

  #types(schema: Schema, where: string): string[] {
    const t = schema.type;
    if (t === undefined) {
      if (schema.properties !== undefined || schema.additionalProperties !== undefined) {
        return ["object"];
      }
      if (schema.items !== undefined || schema.prefixItems !== undefined) return ["array"];
      return ["any"];
    }
    const list = Array.isArray(t) ? t : [t];
    if (list.length === 0 || list.some((x) => typeof x !== "string" || !TYPES.includes(x))) {
      throw new ConstraintError(
        "invalid_schema",
        `${where}/type: must be one of ${TYPES.join(", ")} (or a list of them)`,
      );
    }
    return [...new Set(list as string[])];
  }

  #typed(type: string, schema: Schema, where: string, hint: string): string {
    switch (type) {
      case "any":
        return this.primitive("value");
      case "boolean":
      case "null":
        return this.primitive(type);
      case "string": {
        const content = stringContent(schema, where, this.primitive("char"));
        if (content === `${this.primitive("char")}*`) return this.primitive("string");
        return this.rule(hint, `"\\"" ${content} "\\"" ${this.primitive("space")}`);
      }
      case "integer":
        return this.#integer(schema, where, hint);
      case "number":
        return this.#number(schema, where, hint);
      case "array":
        return arrayRule(this, schema, where, hint);
      default:
        return objectRule(this, schema as ObjectShape, where, hint);
    }
  }

  #bound(schema: Schema, key: string, where: string): number | undefined {
    const v = schema[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new ConstraintError("invalid_schema", `${where}/${key}: must be a number`);
    }
    return v;
  }

  #integer(schema: Schema, where: string, hint: string): string {
    const min = this.#bound(schema, "minimum", where);
    const max = this.#bound(schema, "maximum", where);
    const xmin = this.#bound(schema, "exclusiveMinimum", where);
    const xmax = this.#bound(schema, "exclusiveMaximum", where);
    if ([min, max, xmin, xmax].every((v) => v === undefined)) return this.primitive("integer");
    const lo = Math.max(min ?? -Infinity, xmin === undefined ? -Infinity : Math.floor(xmin) + 1);
    const hi = Math.min(max ?? Infinity, xmax === undefined ? Infinity : Math.ceil(xmax) - 1);
    const range = integerRange(lo, hi);
    if (range === null) {
      throw new ConstraintError("invalid_schema", `${where}: no integer lies within the bounds`);
    }
    return this.rule(hint, `${range} ${this.primitive("space")}`);
  }

  #number(schema: Schema, where: string, hint: string): string {
    const bounds = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
      .filter((k) => schema[k] !== undefined);
    if (bounds.length === 0) return this.primitive("number");
    if (bounds.length === 1 && bounds[0] === "minimum" && schema.minimum === 0) {
      const ip = this.primitive("integral-part"), dp = this.primitive("decimal-part");
      return this.rule(
        hint,
        `${ip} ("." ${dp})? ([eE] [-+]? ${ip})? ${this.primitive("space")}`,
      );
    }
    throw new ConstraintError(
      "unsupported_schema",
      `${where}: bounds on a number ('${bounds.join("', '")}') cannot be enforced, except ` +
        "minimum 0; use an integer, or a string with a pattern",
    );
  }

  #ref(schema: Schema, where: string): string {
    const ref = schema.$ref;
    if (typeof ref !== "string") {
      throw new ConstraintError("invalid_schema", `${where}/$ref: must be a string`);
    }
    if (Object.keys(schema).some((k) => k !== "$ref" && !ANNOTATIONS.has(k))) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: keywords beside $ref cannot be enforced together with it`,
      );
    }
    const known = this.#refs.get(ref);
    if (known !== undefined) return known;
    if (!ref.startsWith("#")) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}/$ref: only references inside the schema ('#/$defs/...') are supported`,
      );
    }
    let target: unknown = this.#root;
    for (const raw of ref.slice(1).split("/").slice(1)) {
      const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      target = isObject(target) ? target[key] : Array.isArray(target) ? target[+key] : undefined;
      if (target === undefined) {
        throw new ConstraintError("invalid_schema", `${where}/$ref: '${ref}' points at nothing`);
      }
    }
    const hint = ref.split("/").at(-1) || "root-ref";
    const name = this.rule(`ref-${hint}`, `<pending ${ref}>`);
    this.#refs.set(ref, name);
    const expr = this.visit(target, ref, `${hint}-value`);
    this.#rules.set(name, expr);
    return name;
  }

  #literals(values: unknown[]): string {
    const alts = values.map((v) => gbnfLiteral(JSON.stringify(v)));
    return `(${alts.join(" | ")}) ${this.primitive("space")}`;
  }

  /** A string key that is none of `names`, with no escapes (so it cannot spell one of them). */
  otherKey(names: readonly string[]): string {
    const plain = gbnfClass(JSON_PLAIN_EXCLUDED, true);
    type Node = { end: boolean; next: Map<number, Node> };
    const root: Node = { end: false, next: new Map() };
    for (const name of names) {
      let node = root;
      for (const ch of name) {
        const cp = ch.codePointAt(0)!;
        if (!node.next.has(cp)) node.next.set(cp, { end: false, next: new Map() });
        node = node.next.get(cp)!;
      }
      node.end = true;
    }
    const build = (node: Node, hint: string): string => {
      const taken = [...node.next.keys()].map((cp): [number, number] => [cp, cp]);
      const alts = [
        `${gbnfClass([...JSON_PLAIN_EXCLUDED, ...taken], true)} ${plain}*`,
        ...[...node.next].map(([cp, child]) =>
          `${gbnfLiteral(String.fromCodePoint(cp))} ${build(child, hint)}`
        ),
      ];
      if (!node.end) alts.push('""');
      return this.rule(hint, alts.join(" | "));
    };
    return this.rule(
      "other-key",
      `"\\"" ${build(root, "other-key-rest")} "\\"" ${this.primitive("space")}`,
    );
  }

  pointer(where: string, key: string | number): string {
    return `${where}/${segment(key)}`;
  }
}
