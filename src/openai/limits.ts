/**
 * Schema pieces whose refusals say the limit ("temperature: must be between 0 and 2",
 * "stop: at most 16 stop sequences"), so a client can fix its request from the message
 * alone. zod's own wording ("Too big: expected number to be <=2") names the bound but not
 * the range, and says nothing at all inside a union.
 */

import { z } from "zod";

/** A number in `[lo, hi]`. */
export function numberBetween(lo: number, hi: number): z.ZodNumber {
  const message = `must be between ${lo} and ${hi}`;
  return z.number().min(lo, message).max(hi, message);
}

/** A number in `(0, hi]`. */
export function positiveAtMost(hi: number): z.ZodNumber {
  const message = `must be greater than 0 and at most ${hi}`;
  return z.number().gt(0, message).max(hi, message);
}

/** An integer of at least `lo`. */
export function intAtLeast(lo: number): z.ZodInt {
  return z.int().min(lo, `must be at least ${lo}`);
}

/** An integer in `[lo, hi]`. */
export function intBetween(lo: number, hi: number): z.ZodInt {
  const message = `must be between ${lo} and ${hi}`;
  return z.int().min(lo, message).max(hi, message);
}

/** A string with at least one character. */
export function nonEmpty(): z.ZodString {
  return z.string().min(1, "must not be empty");
}
