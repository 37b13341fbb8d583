/**
 * Varied JSON schemas for the structured-output tests, drawn from a seeded generator:
 * nested objects (required and optional properties, closed or open to extra keys),
 * arrays with bounds and tuples, enums and consts of strings with escapes and non-ASCII,
 * anyOf, $ref into $defs (references to references), integers with bounds, numbers, booleans, null,
 * bounded strings, formats and patterns. Every string and array is bounded (extra
 * properties aside, see `open`), so an output that follows the schema comes to an end
 * within a few hundred tokens (references here do not recurse: a recursive schema lets a
 * model nest as deep as it likes).
 */

import { Rng } from "../../src/gguf/mod.ts";

type Schema = Record<string, unknown>;

const WORDS = ['a"b', "ünïcødé", "😀 ok", "tab\there", "back\\slash", "日本", "plain", "new\nline"];
const KEYS = ["name", "id", "size", "tags", "kind", "when", "ok", "note", "x", "ñame", "deep"];

export class SchemaMaker {
  readonly #rng: Rng;
  readonly #open: boolean;

  /**
   * `open`: some objects take extra properties (under keys of any length, as many as the
   * writer likes: the one unbounded part, left out where a model writes the documents).
   */
  constructor(seed: number, options: { open?: boolean } = {}) {
    this.#rng = new Rng(seed);
    this.#open = options.open ?? true;
  }

  #int(lo: number, hi: number): number {
    return lo + Math.floor(this.#rng.float() * (hi - lo + 1));
  }

  #pick<T>(list: readonly T[]): T {
    return list[this.#int(0, list.length - 1)];
  }

  /** A schema for a whole document: an object at the top, as response formats want. */
  document(): Schema {
    const body = this.#object(0);
    if (this.#rng.float() < 0.15) {
      return {
        $defs: {
          point: {
            type: "object",
            properties: {
              x: { type: "integer", minimum: -9, maximum: 9 },
              tag: { $ref: "#/$defs/tag" },
            },
            required: ["x", "tag"],
            additionalProperties: false,
          },
          tag: { enum: ["α", "β", "\\"] },
          item: {
            type: "object",
            properties: {
              label: { type: "string", maxLength: 6 },
              child: { anyOf: [{ $ref: "#/$defs/point" }, { type: "null" }] },
            },
            required: ["label", "child"],
            additionalProperties: false,
          },
        },
        ...body,
        properties: { ...(body.properties as Schema), item: { $ref: "#/$defs/item" } },
        required: [...(body.required as string[]), "item"],
      };
    }
    return body;
  }

  #object(depth: number): Schema {
    const n = this.#int(1, 3);
    const keys = [...new Set(Array.from({ length: n }, () => this.#pick(KEYS)))];
    const properties: Schema = {};
    for (const k of keys) properties[k] = this.#value(depth + 1);
    const required = keys.filter(() => this.#rng.float() < 0.7);
    const open = this.#rng.float() < 0.2 && this.#open;
    return {
      type: "object",
      properties,
      required,
      additionalProperties: open ? { type: "integer", minimum: 0, maximum: 9 } : false,
    };
  }

  #value(depth: number): Schema {
    const kinds = depth < 2
      ? [
        "object",
        "array",
        "enum",
        "anyOf",
        "int",
        "number",
        "bool",
        "null",
        "string",
        "format",
        "const",
        "tuple",
        "pattern",
      ]
      : ["enum", "int", "number", "bool", "null", "string", "format", "const", "pattern"];
    switch (this.#pick(kinds)) {
      case "object":
        return this.#object(depth);
      case "array": {
        const min = this.#int(0, 2);
        return { type: "array", items: this.#value(depth + 1), minItems: min, maxItems: min + 1 };
      }
      case "tuple":
        return {
          type: "array",
          prefixItems: [this.#value(depth + 1), { type: "boolean" }],
          items: false,
        };
      case "enum":
        return { enum: [this.#pick(WORDS), this.#pick(WORDS), 7, null] };
      case "const":
        return { const: this.#pick(WORDS) };
      case "anyOf":
        return {
          anyOf: [{ type: "integer", minimum: -5, maximum: 5 }, {
            type: "string",
            maxLength: 4,
          }],
        };
      case "int": {
        const lo = this.#int(-1000, 1000);
        return { type: "integer", minimum: lo, maximum: lo + this.#int(0, 5000) };
      }
      case "number":
        return { type: "number" };
      case "bool":
        return { type: "boolean" };
      case "null":
        return { type: "null" };
      case "string":
        return { type: "string", minLength: this.#int(0, 2), maxLength: this.#int(3, 10) };
      case "format":
        return { type: "string", format: this.#pick(["date", "date-time", "uuid", "email"]) };
      default:
        return {
          type: "string",
          pattern: this.#pick(["^[A-Z]{2}-\\d{2,4}$", "^(yes|no|é{1,3})$"]),
        };
    }
  }
}
