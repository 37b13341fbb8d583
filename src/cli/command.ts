import { parseArgs, type ParseArgsConfig } from "node:util";
import { errorMessage } from "../common/errors.ts";
import { UsageError } from "./errors.ts";

/** One `neuron <name>` subcommand. `run` returns the process exit code. */
export interface Command {
  summary: string;
  run(args: string[]): Promise<number>;
}

/** Exit codes shared by every command. */
export const EXIT_OK = 0;
export const EXIT_RUNTIME = 1;
export const EXIT_USAGE = 2;

/**
 * `parseArgs` in strict mode, where a malformed command line is a UsageError (exit 2, one
 * line) rather than a crash.
 */
export function parseFlags<T extends ParseArgsConfig & { strict: true }>(
  config: T,
  context?: string,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    throw new UsageError(context ? `${context}: ${errorMessage(err)}` : errorMessage(err));
  }
}

/** A flag's non-negative integer value, `fallback` when absent; anything else is a UsageError. */
export function countFlag(
  command: string,
  name: string,
  value: string | undefined,
  fallback: number,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) {
    throw new UsageError(`${command}: ${name} must be a non-negative integer`);
  }
  return n;
}
