import { parse, TomlError } from "smol-toml";
import type { z } from "zod";
import { errorMessage } from "../common/errors.ts";
import { applyEnvOverrides } from "./env.ts";
import { ConfigError } from "./errors.ts";
import { type Config, configSchema } from "./schema.ts";

export interface LoadedConfig {
  config: Config;
  /** The file read, or null when running on defaults. */
  file: string | null;
  /** `NEURON_*` variables that named no key (worth a debug line, not an error). */
  ignoredEnv: string[];
}

/**
 * Reads neuron.toml (when `file` is given), applies `NEURON_*` overrides and validates the
 * result. Every failure is a ConfigError whose one-line message names the file (or the
 * variable) and the key.
 */
export async function loadConfig(
  file: string | null,
  env: Record<string, string> = Deno.env.toObject(),
): Promise<LoadedConfig> {
  let raw: Record<string, unknown> = {};
  if (file !== null) {
    let text: string;
    try {
      text = await Deno.readTextFile(file);
    } catch (err) {
      throw new ConfigError(`${file}: cannot read: ${errorMessage(err)}`, { cause: err });
    }
    raw = parseToml(text, file);
  }
  return { ...validate(raw, file, env), file };
}

/** Validates an already-parsed document; `label` names it in messages. */
export function validate(
  raw: Record<string, unknown>,
  label: string | null,
  env: Record<string, string> = {},
): { config: Config; ignoredEnv: string[] } {
  const overrides = applyEnvOverrides(raw, configSchema, env);
  const result = configSchema.safeParse(raw);
  if (result.success) return { config: result.data, ignoredEnv: overrides.ignored };
  const issue = result.error.issues[0];
  const path = issue.path.map(String);
  const fromEnv = overrides.applied.get(path.join(".")) ??
    [...overrides.applied].find(([key]) => path.join(".").startsWith(key + "."))?.[1];
  const where = fromEnv ?? label ?? "config";
  throw new ConfigError(`${where}: ${describeIssue(issue, raw)}`);
}

function parseToml(text: string, file: string): Record<string, unknown> {
  try {
    return parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const reason = err.message.split("\n")[0].replace(/^Invalid TOML document: /, "");
      const line = text.split(/\r?\n/)[err.line - 1]?.trim() ?? "";
      throw new ConfigError(
        `${file}:${err.line}:${err.column}: invalid TOML: ${reason} (at ${JSON.stringify(line)})`,
        { cause: err },
      );
    }
    throw new ConfigError(`${file}: invalid TOML: ${errorMessage(err)}`, { cause: err });
  }
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let node = root;
  for (const seg of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<PropertyKey, unknown>)[seg];
  }
  return node;
}

function typeName(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isInteger(value)) return "float";
  if (typeof value === "number") return "integer";
  if (typeof value === "object") return value instanceof Date ? "datetime" : "table";
  return typeof value;
}

function keyPath(path: PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    out += typeof seg === "number" ? `[${seg}]` : (out ? "." : "") + String(seg);
  }
  return out;
}

/** One line per issue: `key.path: what was expected, what was found`. */
function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  const key = keyPath(issue.path);
  const prefix = key ? `${key}: ` : "";
  const got = valueAt(raw, issue.path);
  switch (issue.code) {
    case "unrecognized_keys": {
      const unknown = issue.keys.map((k) => keyPath([...issue.path, k])).join(", ");
      return `unknown key ${unknown}`;
    }
    case "invalid_type":
      if (got === undefined) return `${prefix}required key is missing`;
      return `${prefix}expected ${issue.expected}, got ${typeName(got)}`;
    case "too_big":
      return `${prefix}must be at most ${issue.maximum}, got ${JSON.stringify(got)}`;
    case "too_small":
      return `${prefix}must be at least ${issue.minimum}, got ${JSON.stringify(got)}`;
    case "invalid_value":
      return `${prefix}expected one of ${
        issue.values.map((v) => JSON.stringify(v)).join(", ")
      }, got ${JSON.stringify(got)}`;
    case "custom":
      return `${prefix}${issue.message}`;
    default:
      return `${prefix}${issue.message}${
        got !== undefined && typeof got !== "object" ? `, got ${JSON.stringify(got)}` : ""
      }`;
  }
}
