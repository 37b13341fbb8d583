/**
 * How many tokens the next step may carry, so that a step takes about `targetMs`: a
 * request that arrives while a long prompt is being prefilled waits for at most one such
 * step, not for the whole prompt. The cost per token is learned from the steps that ran
 * (an average that favours recent steps), so a GPU that prefills thousands of tokens in
 * that time gets the full `maxTokens`, and a CPU gets chunks it can finish in time.
 */

const INITIAL_TOKENS = 64;
/** Steps this small say more about fixed per-step costs than about the cost per token. */
const MIN_SAMPLE_TOKENS = 16;
const SMOOTHING = 0.7;

export class StepBudget {
  #secondsPerToken = 0;

  constructor(
    readonly targetMs: number,
    readonly minTokens: number,
    readonly maxTokens: number,
  ) {}

  /** The token budget of the next step. */
  tokens(): number {
    if (this.#secondsPerToken === 0) return Math.min(this.maxTokens, INITIAL_TOKENS);
    // The epsilon keeps exact fits (0.15 s / 3.125 ms = 48) from rounding down.
    const fit = Math.floor(this.targetMs / 1000 / this.#secondsPerToken + 1e-9);
    return Math.max(this.minTokens, Math.min(this.maxTokens, fit));
  }

  /** Learns from a step of `tokens` tokens that took `seconds`. */
  observe(tokens: number, seconds: number): void {
    if (tokens < MIN_SAMPLE_TOKENS || seconds <= 0) return;
    const perToken = seconds / tokens;
    this.#secondsPerToken = this.#secondsPerToken === 0
      ? perToken
      : SMOOTHING * this.#secondsPerToken + (1 - SMOOTHING) * perToken;
  }
}
