import type { z } from "zod";
import { ConfigError } from "./errors.ts";

/**
 * `NEURON_*` environment overrides: `NEURON_PORT=9000` sets `port`,
 * `NEURON_HARNESS__NATIVE__HF_CACHE=/x` sets `harness.native.hf_cache` (`__` between path
 * segments, array entries by index: `NEURON_HARNESSES__1__ENDPOINT`). Values are typed by
 * the schema so `9000` becomes a number and `true` a boolean; lists and tables take JSON.
 * Variables that name no config key (e.g. `NEURON_FIXTURES`, used by tests) are left alone.
 */

const PREFIX = "NEURON_";

type Schema = z.ZodType;
type Segment = string | number;

export interface EnvOverrides {
  /** Key path (`harness.native.hf_cache`) -> the variable that set it. */
  applied: Map<string, string>;
  /** `NEURON_*` variables that name no key. */
  ignored: string[];
}

interface Def {
  type: string;
  innerType?: Schema;
  in?: Schema;
  shape?: Record<string, Schema>;
  valueType?: Schema;
  element?: Schema;
}

function def(schema: Schema): Def {
  return (schema as unknown as { def: Def }).def;
}

/** Peels defaults, optionals and pipes off a schema to reach the type that holds values. */
function unwrap(schema: Schema): Schema {
  let s = schema;
  for (;;) {
    const d = def(s);
    if (d.innerType && ["default", "prefault", "optional", "nullable"].includes(d.type)) {
      s = d.innerType;
    } else if (d.type === "pipe" && d.in) {
      s = d.in;
    } else {
      return s;
    }
  }
}

/** Resolves env path segments against the schema; null when they name no key. */
function resolve(schema: Schema, raw: string[]): { path: Segment[]; leaf: Schema } | null {
  let s = unwrap(schema);
  const path: Segment[] = [];
  for (const part of raw) {
    const d = def(s);
    const key = part.toLowerCase();
    if (d.type === "object" && d.shape && Object.hasOwn(d.shape, key)) {
      path.push(key);
      s = unwrap(d.shape[key]);
    } else if (d.type === "record" && d.valueType && key !== "") {
      path.push(key);
      s = unwrap(d.valueType);
    } else if (d.type === "array" && d.element && /^\d+$/.test(part)) {
      path.push(Number(part));
      s = unwrap(d.element);
    } else {
      return null;
    }
  }
  return { path, leaf: s };
}

const TRUE = ["true", "1", "yes", "on"];
const FALSE = ["false", "0", "no", "off"];

function typed(leaf: Schema, value: string, name: string): unknown {
  const type = def(leaf).type;
  if (type === "number") {
    const n = value.trim() === "" ? NaN : Number(value);
    if (!Number.isFinite(n)) {
      throw new ConfigError(`${name}: expected number, got ${JSON.stringify(value)}`);
    }
    return n;
  }
  if (type === "boolean") {
    const v = value.trim().toLowerCase();
    if (TRUE.includes(v)) return true;
    if (FALSE.includes(v)) return false;
    throw new ConfigError(`${name}: expected boolean, got ${JSON.stringify(value)}`);
  }
  if (type === "array" || type === "object" || type === "record") {
    try {
      return JSON.parse(value);
    } catch {
      throw new ConfigError(`${name}: expected JSON (${type}), got ${JSON.stringify(value)}`);
    }
  }
  return value;
}

type Container = Record<string, unknown> | unknown[];

function setPath(root: Record<string, unknown>, path: Segment[], value: unknown, name: string) {
  let node: Container = root;
  for (let i = 0; i < path.length - 1; i++) {
    const seg = path[i];
    const next = (node as Record<string, unknown>)[seg as string];
    if (next === undefined) {
      if (typeof path[i + 1] === "number") {
        throw new ConfigError(`${name}: ${path.slice(0, i + 1).join(".")} has no entries`);
      }
      const created: Record<string, unknown> = {};
      (node as Record<string, unknown>)[seg as string] = created;
      node = created;
    } else if (typeof next === "object" && next !== null) {
      node = next as Container;
    } else {
      throw new ConfigError(`${name}: ${path.slice(0, i + 1).join(".")} is not a table`);
    }
  }
  const last = path[path.length - 1];
  if (Array.isArray(node) && typeof last === "number" && last > node.length) {
    throw new ConfigError(`${name}: index ${last} is past the end of the list`);
  }
  (node as Record<string, unknown>)[last as string] = value;
}

/** Applies every `NEURON_*` variable of `env` onto `raw` (the parsed file), in place. */
export function applyEnvOverrides(
  raw: Record<string, unknown>,
  schema: Schema,
  env: Record<string, string>,
): EnvOverrides {
  const applied = new Map<string, string>();
  const ignored: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(PREFIX)) continue;
    const parts = name.slice(PREFIX.length).split("__");
    const found = resolve(schema, parts);
    if (!found) {
      ignored.push(name);
      continue;
    }
    setPath(raw, found.path, typed(found.leaf, env[name], name), name);
    applied.set(found.path.join("."), name);
  }
  return { applied, ignored };
}
