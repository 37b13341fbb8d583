/**
 * JSON strings under a schema's string keywords, as GBNF for what stands between the
 * quotes: any content (a character is a plain one or an escape), bounded lengths, a
 * `pattern` (json_pattern.ts), or a `format`. Formats generate a well-formed subset of
 * what the format allows (days 01-28, so no date is ever invalid; times in UTC), which
 * validators accept whatever their strictness; formats with no such subset are refused.
 */

import { ConstraintError } from "./errors.ts";
import { patternGrammar } from "./json_pattern.ts";

/** Repetition counts GBNF can hold exactly (past it a count means "unbounded"). */
export const MAX_COUNT = 2000;

export const CHAR_RULE = String
  .raw`[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])`;

const DATE = String
  .raw`[0-9] [0-9] [0-9] [0-9] "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])`;
const TIME = String.raw`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] "Z"`;
const OCTET = String.raw`("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9])`;
const HEX = "[0-9a-f]";

const FORMATS: Record<string, string> = {
  date: DATE,
  time: TIME,
  "date-time": `${DATE} "T" ${TIME}`,
  uuid: `${HEX}{8} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{4} "-" ${HEX}{12}`,
  email: String.raw`[a-z0-9]{1,32} "@" [a-z0-9]{1,32} "." [a-z]{2,8}`,
  ipv4: `${OCTET} "." ${OCTET} "." ${OCTET} "." ${OCTET}`,
};

export const SUPPORTED_FORMATS: readonly string[] = Object.keys(FORMATS);

export interface StringKeywords {
  minLength?: unknown;
  maxLength?: unknown;
  pattern?: unknown;
  format?: unknown;
}

function count(value: unknown, keyword: string, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new ConstraintError(
      "invalid_schema",
      `${where}: ${keyword} must be a non-negative integer`,
    );
  }
  if (value > MAX_COUNT) {
    throw new ConstraintError(
      "unsupported_schema",
      `${where}: ${keyword} ${value} is above ${MAX_COUNT}, the most that can be enforced`,
    );
  }
  return value;
}

/**
 * The content of a string under `s`'s keywords, as a GBNF expression; `char` is the name
 * of the rule for one character of content.
 */
export function stringContent(s: StringKeywords, where: string, char: string): string {
  const min = count(s.minLength, "minLength", where) ?? 0;
  const max = count(s.maxLength, "maxLength", where);
  if (max !== undefined && max < min) {
    throw new ConstraintError("invalid_schema", `${where}: maxLength is below minLength`);
  }
  const bounded = min > 0 || max !== undefined;
  if (s.pattern !== undefined || s.format !== undefined) {
    if (bounded) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: minLength/maxLength together with pattern or format cannot be enforced`,
      );
    }
    if (s.pattern !== undefined && s.format !== undefined) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: pattern together with format cannot be enforced`,
      );
    }
  }
  if (s.pattern !== undefined) {
    if (typeof s.pattern !== "string") {
      throw new ConstraintError("invalid_schema", `${where}: pattern must be a string`);
    }
    try {
      new RegExp(s.pattern, "u");
    } catch (err) {
      throw new ConstraintError(
        "invalid_schema",
        `${where}: pattern is not a valid regular expression: ${(err as Error).message}`,
      );
    }
    return patternGrammar(s.pattern, where);
  }
  if (s.format !== undefined) {
    if (typeof s.format !== "string") {
      throw new ConstraintError("invalid_schema", `${where}: format must be a string`);
    }
    const grammar = FORMATS[s.format];
    if (grammar === undefined) {
      throw new ConstraintError(
        "unsupported_schema",
        `${where}: format '${s.format}' cannot be enforced (supported: ${
          SUPPORTED_FORMATS.join(", ")
        })`,
      );
    }
    return grammar;
  }
  if (!bounded) return `${char}*`;
  return max === undefined ? `${char}{${min},}` : `${char}{${min},${max}}`;
}
