/**
 * The few assertions the suites need. JSR (and so @std/assert) is unreachable from our build
 * machines; node:util's deep equality does the heavy lifting.
 */
import { inspect, isDeepStrictEqual } from "node:util";

export class AssertionError extends Error {
  override name = "AssertionError";
}

export function assert(cond: unknown, message = "assertion failed"): asserts cond {
  if (!cond) throw new AssertionError(message);
}

function show(value: unknown): string {
  return inspect(value, { depth: 6, colors: false, breakLength: 100 });
}

export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  if (isDeepStrictEqual(actual, expected)) return;
  throw new AssertionError(
    `${message ? message + ": " : ""}values differ\n  actual:   ${show(actual)}\n  expected: ${
      show(expected)
    }`,
  );
}

export function assertNotEquals<T>(actual: T, expected: T, message?: string): void {
  if (!isDeepStrictEqual(actual, expected)) return;
  throw new AssertionError(
    `${message ? message + ": " : ""}expected a value other than ${show(expected)}`,
  );
}

export function assertMatch(actual: string, pattern: RegExp, message?: string): void {
  if (pattern.test(actual)) return;
  throw new AssertionError(
    `${message ? message + ": " : ""}${JSON.stringify(actual)} does not match ${pattern}`,
  );
}

export function assertStringIncludes(actual: string, part: string, message?: string): void {
  if (actual.includes(part)) return;
  throw new AssertionError(
    `${message ? message + ": " : ""}${JSON.stringify(actual)} does not include ${
      JSON.stringify(part)
    }`,
  );
}

// deno-lint-ignore no-explicit-any
type ErrorClass<E extends Error> = new (...args: any[]) => E;

function check<E extends Error>(err: unknown, cls?: ErrorClass<E>): E {
  if (cls && !(err instanceof cls)) {
    throw new AssertionError(`expected ${cls.name}, got ${show(err)}`);
  }
  return err as E;
}

export function assertThrows<E extends Error = Error>(fn: () => unknown, cls?: ErrorClass<E>): E {
  try {
    fn();
  } catch (err) {
    return check(err, cls);
  }
  throw new AssertionError("expected the function to throw");
}

export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  cls?: ErrorClass<E>,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    return check(err, cls);
  }
  throw new AssertionError("expected the promise to reject");
}
