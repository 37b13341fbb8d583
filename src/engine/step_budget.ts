/**
 * How much prompt a step may carry, so that the step takes about `targetMs`: a request
 * that arrives while a long prompt is being prefilled waits for at most one such step, not
 * for the whole prompt.
 *
 * A step's time is modelled as
 *
 *   seconds = fixed + perToken · tokens + perAttended · attended + perRead · read
 *
 * where `attended` sums, over the step's tokens, the positions each one attends to, and
 * `read` sums, over its runs, the positions whose K/V the run reads. The fixed part is what
 * every step pays whatever it carries (on a CPU, reading all the weights once); the
 * per-token part is the matrix products; the attended part is attention's arithmetic,
 * which makes a chunk at position 4000 several times dearer than the same chunk at
 * position 0; the read part is attention's memory traffic, paid once per run however many
 * of its tokens share it. The four costs are fitted by least squares, none below zero, to
 * recent steps of every size, so a GPU that prefills thousands of tokens within the
 * target gets its full `maxTokens`, and a CPU gets chunks it can finish in time at any
 * depth.
 *
 * Deep in a long prompt the target alone would starve the prompt: at position 30000 of a
 * small model on a CPU, reading the cache once takes about the whole target, so each step
 * would carry one token and pay that read again for it. A chunk therefore carries at least
 * enough tokens that its own work is `EFFICIENT_CHUNK` times what carrying it at all costs
 * (the read, and the fixed part when nothing else shares the step), up to `MAX_STRETCH`
 * times the target: the prompt gets most of the machine, and others wait a bounded time.
 */

/** What a step carries: its tokens, the positions they attend to summed, and the
 * positions its runs read. */
export interface StepWork {
  tokens: number;
  attended: number;
  read: number;
}

const EMPTY: StepWork = { tokens: 0, attended: 0, read: 0 };

/** Sizes the prompt chunks of a step (the scheduler asks it, chunk by chunk). */
export interface ChunkSizer {
  /** Prompt tokens a step gives its first prompt chunk even when its decodes alone fill
   * it, so no prompt starves behind many decoding sequences. */
  readonly minTokens: number;
  /** How many of `wanted` prompt tokens, from position `start` on, may join a step that
   * already carries `work` (0 when none fit). */
  fit(work: StepWork, start: number, wanted: number): number;
}

/** The work of `count` tokens at positions [start, start + count). */
export function runWork(start: number, count: number): StepWork {
  return {
    tokens: count,
    attended: count * start + (count * (count + 1)) / 2,
    read: count > 0 ? start + count : 0,
  };
}

/** The work of a step made of these runs. */
export function stepWork(runs: ReadonlyArray<{ start: number; count: number }>): StepWork {
  return runs.reduce((work, run) => sum(work, runWork(run.start, run.count)), EMPTY);
}

/** Before any step has been timed, and the least the fit may extrapolate to. */
const INITIAL_TOKENS = 64;
/** Steps the fit remembers per size class (tokens 1, 2-3, 4-7, ...): a long run of decode
 * steps must not push out what prompt chunks taught about the cost per token. */
const PER_SIZE = 8;
/** A chunk's own work is at least this many times its overhead (see the top). */
const EFFICIENT_CHUNK = 3;
/** ... unless its step would then take more than this many times the target. */
const MAX_STRETCH = 10;
/** Features are scaled so that the normal equations stay well conditioned. */
const POSITION_UNIT = 1000;
const RIDGE = 1e-9;

type Costs = [fixed: number, perToken: number, perAttended: number, perRead: number];

export class StepBudget implements ChunkSizer {
  readonly #bySize: Array<Array<{ x: Costs; seconds: number }>> = [];
  #costs: Costs | null = null;
  #largest = 0;

  constructor(
    readonly targetMs: number,
    readonly minTokens: number,
    readonly maxTokens: number,
  ) {}

  fit(work: StepWork, start: number, wanted: number): number {
    const room = Math.min(wanted, this.maxTokens - work.tokens);
    if (room <= 0) return 0;
    if (this.#costs === null) return Math.min(room, INITIAL_TOKENS);
    // A fit from small steps alone says little about large ones: grow at most twofold.
    const seen = Math.max(INITIAL_TOKENS, 2 * this.#largest) - work.tokens;
    const target = this.targetMs / 1000;
    const fits = (n: number) => this.predict(sum(work, runWork(start, n))) <= target;
    // The predicted time grows with the chunk: binary search for the largest that fits.
    const most = Math.max(0, Math.min(room, seen));
    return Math.max(largest(most, fits), this.#efficientFloor(work, start, most));
  }

  /** The fewest tokens from `start` on whose work is EFFICIENT_CHUNK times their overhead,
   * within MAX_STRETCH times the target (at most `most`). */
  #efficientFloor(work: StepWork, start: number, most: number): number {
    const carried = sum(work, { tokens: 0, attended: 0, read: start });
    const before = this.predict(carried);
    const overhead = before - (work.tokens > 0 ? this.predict(work) : 0);
    const stretch = (MAX_STRETCH * this.targetMs) / 1000;
    const within = largest(most, (n) => this.predict(sum(work, runWork(start, n))) <= stretch);
    const wasteful = (n: number) =>
      this.predict(sum(work, runWork(start, n))) - before < EFFICIENT_CHUNK * overhead;
    return Math.min(within, largest(most, wasteful) + 1);
  }

  /** Predicted seconds of a step carrying `work` (0 before any step was timed). */
  predict(work: StepWork): number {
    if (this.#costs === null) return 0;
    const x = features(work);
    return this.#costs.reduce((s, c, i) => s + c * x[i], 0);
  }

  /** Learns from a step that carried `work` and took `seconds`. */
  observe(work: StepWork, seconds: number): void {
    if (work.tokens <= 0 || !(seconds > 0)) return;
    const size = Math.floor(Math.log2(work.tokens));
    const steps = (this.#bySize[size] ??= []);
    steps.push({ x: features(work), seconds });
    if (steps.length > PER_SIZE) steps.shift();
    this.#largest = Math.max(this.#largest, work.tokens);
    this.#costs = nonNegativeFit(this.#bySize.flat());
  }
}

/** The largest n in [0, most] for which `holds` (which holds for every n below one it
 * holds for), by binary search. */
function largest(most: number, holds: (n: number) => boolean): number {
  let lo = 0, hi = most;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (holds(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

function sum(a: StepWork, b: StepWork): StepWork {
  return { tokens: a.tokens + b.tokens, attended: a.attended + b.attended, read: a.read + b.read };
}

function features(w: StepWork): Costs {
  return [1, w.tokens, w.attended / POSITION_UNIT, w.read / POSITION_UNIT];
}

/**
 * Least squares with every cost ≥ 0: the best unconstrained fit over each subset of the
 * four costs (the others held at zero), keeping the best whose costs are all ≥ 0. With
 * four unknowns that is fifteen small solves, exact where an iterative method would not be.
 */
function nonNegativeFit(steps: Array<{ x: Costs; seconds: number }>): Costs {
  let best: Costs = [0, 0, 0, 0];
  let bestError = Infinity;
  for (let mask = 1; mask < 16; mask++) {
    const used = [0, 1, 2, 3].filter((i) => mask & (1 << i));
    const c = solveSubset(steps, used);
    if (c === null || c.some((v) => v < 0)) continue;
    const error = steps.reduce((s, { x, seconds }) => {
      const r = x.reduce((p, xi, i) => p + xi * c[i], 0) - seconds;
      return s + r * r;
    }, 0);
    if (error < bestError) {
      bestError = error;
      best = c;
    }
  }
  return best;
}

/** The least-squares costs of the features in `used`, the others zero. */
function solveSubset(steps: Array<{ x: Costs; seconds: number }>, used: number[]): Costs | null {
  const n = used.length;
  // Normal equations [XᵀX | Xᵀy], solved by Gaussian elimination with partial pivoting.
  const m = used.map((i) => [
    ...used.map((j) => steps.reduce((s, { x }) => s + x[i] * x[j], 0)),
    steps.reduce((s, { x, seconds }) => s + x[i] * seconds, 0),
  ]);
  for (let i = 0; i < n; i++) m[i][i] += RIDGE;
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r][col]) > Math.abs(m[pivot][col])) pivot = r;
    if (Math.abs(m[pivot][col]) < 1e-12) return null;
    [m[col], m[pivot]] = [m[pivot], m[col]];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r][col] / m[col][col];
      for (let k = col; k <= n; k++) m[r][k] -= f * m[col][k];
    }
  }
  const out: Costs = [0, 0, 0, 0];
  used.forEach((feature, i) => (out[feature] = m[i][n] / m[i][i]));
  return out;
}
