/**
 * Checked reads of one architecture's metadata keys (`<arch>.<name>`): a count must be a
 * positive integer, a scale finite and above zero, and the error names the key.
 */

import type { GgufFile } from "../gguf/mod.ts";
import { optionalNumber, requireNumber } from "../gguf/metadata.ts";
import { ModelError } from "./errors.ts";

/** Reads the keys of one architecture (`<arch>.<name>`), checked. */
export class ArchKeys {
  constructor(readonly file: GgufFile, readonly architecture: string) {}

  key(name: string): string {
    return `${this.architecture}.${name}`;
  }

  /** A count that must be present: a positive integer. */
  count(name: string): number {
    return checkCount(this.key(name), requireNumber(this.file, this.key(name)));
  }

  /** A count that may be absent (then `fallback`). */
  countOr(name: string, fallback: number): number {
    return checkCount(this.key(name), optionalNumber(this.file, this.key(name)) ?? fallback);
  }

  /** A scale that must be present: finite and above zero. */
  positive(name: string): number {
    return checkPositive(this.key(name), requireNumber(this.file, this.key(name)));
  }

  /** A scale that may be absent (then `fallback`). */
  positiveOr(name: string, fallback: number): number {
    return checkPositive(this.key(name), optionalNumber(this.file, this.key(name)) ?? fallback);
  }

  /** A number that may be absent (then `fallback`), unchecked beyond its type. */
  numberOr(name: string, fallback: number): number {
    return optionalNumber(this.file, this.key(name)) ?? fallback;
  }
}

export function checkCount(key: string, value: number): number {
  if (!(Number.isSafeInteger(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive integer, got ${value}`);
  }
  return value;
}

function checkPositive(key: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive number, got ${value}`);
  }
  return value;
}
