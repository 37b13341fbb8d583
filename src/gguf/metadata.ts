/**
 * Typed access to GGUF metadata. Every required key is read through `require*`, whose
 * error names the missing key and the file, so "what is wrong with this model" is
 * answered by the message alone.
 */

import { GgufError } from "./errors.ts";
import type { GgufArray, GgufFile, GgufValue } from "./file.ts";

function where(file: GgufFile): string {
  return file.path ?? "GGUF";
}

function missing(file: GgufFile, key: string): GgufError {
  return new GgufError("gguf_missing_key", `missing metadata key '${key}' in ${where(file)}`);
}

function wrongType(file: GgufFile, key: string, expected: string, value: GgufValue): GgufError {
  const got = Array.isArray(value) || ArrayBuffer.isView(value) ? "array" : typeof value;
  return new GgufError(
    "gguf_wrong_key_type",
    `metadata key '${key}' in ${where(file)} should be ${expected}, got ${got}`,
  );
}

function asNumber(file: GgufFile, key: string, value: GgufValue): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") {
    throw new GgufError(
      "gguf_wrong_key_type",
      `metadata key '${key}' in ${where(file)} is too large: ${value}`,
    );
  }
  throw wrongType(file, key, "a number", value);
}

export function optionalNumber(file: GgufFile, key: string): number | undefined {
  const v = file.get(key);
  return v === undefined ? undefined : asNumber(file, key, v);
}

export function requireNumber(file: GgufFile, key: string): number {
  const v = file.get(key);
  if (v === undefined) throw missing(file, key);
  return asNumber(file, key, v);
}

export function optionalString(file: GgufFile, key: string): string | undefined {
  const v = file.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw wrongType(file, key, "a string", v);
  return v;
}

export function requireString(file: GgufFile, key: string): string {
  const v = optionalString(file, key);
  if (v === undefined) throw missing(file, key);
  return v;
}

export function optionalBool(file: GgufFile, key: string): boolean | undefined {
  const v = file.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== "boolean") throw wrongType(file, key, "a boolean", v);
  return v;
}

export function optionalArray(file: GgufFile, key: string): GgufArray | undefined {
  const v = file.get(key);
  if (v === undefined) return undefined;
  if (!Array.isArray(v) && !ArrayBuffer.isView(v)) throw wrongType(file, key, "an array", v);
  return v as GgufArray;
}

export function requireStringArray(file: GgufFile, key: string): string[] {
  const v = optionalArray(file, key);
  if (v === undefined) throw missing(file, key);
  if (!Array.isArray(v) || (v.length > 0 && typeof v[0] !== "string")) {
    throw wrongType(file, key, "an array of strings", v);
  }
  return v as string[];
}

export function optionalStringArray(file: GgufFile, key: string): string[] | undefined {
  return file.get(key) === undefined ? undefined : requireStringArray(file, key);
}

/** An integer array (any integer element type) as plain numbers. */
export function optionalIntArray(file: GgufFile, key: string): Int32Array | undefined {
  const v = optionalArray(file, key);
  if (v === undefined) return undefined;
  if (v instanceof Int32Array) return v;
  if (
    v instanceof Uint8Array || v instanceof Int8Array || v instanceof Uint16Array ||
    v instanceof Int16Array || v instanceof Uint32Array
  ) {
    return Int32Array.from(v);
  }
  throw wrongType(file, key, "an array of integers", v);
}

/** `general.architecture`, the prefix of every model hyper-parameter key. */
export function architecture(file: GgufFile): string {
  return requireString(file, "general.architecture");
}
