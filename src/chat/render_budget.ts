/**
 * What one render of a chat template may spend. A template comes from the model file, and
 * Jinja can loop: without a budget, one request could hold its model's thread for good
 * (and its memory with it). The interpreter of @huggingface/jinja is wrapped once so that
 * every node and every block it evaluates (a loop's body is a block, even an empty one),
 * while a budget is active, counts against the time, and every value it builds against the
 * size; the `range` it declares is bounded too, as it builds its whole list at once.
 */

import { Environment, Interpreter } from "@huggingface/jinja";
import { ChatError } from "./errors.ts";

export interface RenderBudget {
  /** Milliseconds of rendering. */
  ms: number;
  /** Characters in any string the template builds, its output included. */
  chars: number;
  /** Items one `range()` may produce. */
  rangeItems: number;
}

export const DEFAULT_RENDER_BUDGET: RenderBudget = {
  ms: 2000,
  chars: 32 * 1024 * 1024,
  rangeItems: 1_000_000,
};

/** How often (in evaluated nodes) the clock is read: a read costs more than a node. */
const CLOCK_EVERY = 1024;

class Meter {
  readonly #deadline: number;
  #nodes = 0;

  constructor(readonly budget: RenderBudget) {
    this.#deadline = performance.now() + budget.ms;
  }

  tick(): void {
    if (++this.#nodes % CLOCK_EVERY === 0 && performance.now() > this.#deadline) {
      throw over(`ran past its ${this.budget.ms} ms`);
    }
  }

  measure(value: unknown): void {
    const v = (value as { value?: unknown }).value;
    if (typeof v === "string" && v.length > this.budget.chars) {
      throw over(`built ${v.length} characters, more than its ${this.budget.chars}`);
    }
  }
}

function over(what: string): ChatError {
  return new ChatError(
    "chat_template_failed",
    `the model's chat template ${what} rendering this request; it was stopped`,
  );
}

let active: Meter | null = null;

type Evaluator = (this: Interpreter, ...args: unknown[]) => unknown;
// evaluateBlock is private in the package's types, a plain method at run time.
const methods = Interpreter.prototype as unknown as Record<"evaluate" | "evaluateBlock", Evaluator>;
for (const name of ["evaluate", "evaluateBlock"] as const) {
  const original = methods[name];
  methods[name] = function (this: Interpreter, ...args: unknown[]): unknown {
    active?.tick();
    const value = original.apply(this, args);
    active?.measure(value);
    return value;
  };
}

/** Jinja's `range`, refusing to build more than the active budget's items. */
export function boundedRange(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error("range() step must not be zero");
  const n = Math.max(0, Math.ceil((to - from) / step));
  const limit = active?.budget.rangeItems ?? DEFAULT_RENDER_BUDGET.rangeItems;
  if (n > limit) throw over(`asked range() for ${n} items, more than its ${limit}`);
  return Array.from({ length: n }, (_, i) => from + i * step);
}

const declare = Environment.prototype.set;
Environment.prototype.set = function (this: Environment, name: string, value: unknown) {
  return declare.call(this, name, name === "range" ? boundedRange : value);
};

/** Runs `render` (one synchronous template render) within `budget`. */
export function withinBudget<T>(budget: RenderBudget, render: () => T): T {
  const outer = active;
  active = new Meter(budget);
  try {
    return render();
  } finally {
    active = outer;
  }
}
