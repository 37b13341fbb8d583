/**
 * How many tokens a sequence drafts next, from how its recent drafts fared. A draft the
 * model takes whole earns a longer one (up to `maxK`); one it refuses halves the length;
 * at length 1 a refusal pauses drafting for a while, twice as long each time it happens
 * again (up to MAX_PAUSE steps), so a stretch of text that repeats nothing costs about one
 * wasted row every MAX_PAUSE steps, and drafting probes again when the text turns to
 * copying. A verification row is cheap beside a step's pass over the weights, but not
 * free: this keeps low-overlap workloads at plain decoding's speed.
 */

/** Steps drafting pauses at most after its drafts kept failing. */
export const MAX_PAUSE = 64;

export class DraftPolicy {
  readonly maxK: number;
  /** Drafts keep `maxK` whatever happens (tests, benchmarks that need drafts to happen). */
  readonly #adaptive: boolean;
  #k: number;
  /** Decode steps left without a draft. */
  #pause = 0;
  /** The next pause's length. */
  #backoff = 1;

  constructor(maxK: number, adaptive = true) {
    this.maxK = maxK;
    this.#adaptive = adaptive;
    this.#k = maxK;
  }

  /** The longest draft this decode step may carry (0: decode plainly). One call per step. */
  next(): number {
    if (!this.#adaptive) return this.maxK;
    if (this.#pause > 0) {
      this.#pause--;
      return 0;
    }
    return this.#k;
  }

  /** A verification took `accepted` of `drafted` tokens. */
  observe(drafted: number, accepted: number): void {
    if (!this.#adaptive || drafted === 0) return;
    if (accepted === drafted) {
      this.#k = Math.min(this.maxK, this.#k * 2);
      this.#backoff = 1;
    } else if (accepted > 0) {
      this.#k = Math.max(1, Math.min(this.maxK, accepted + 1));
      this.#backoff = 1;
    } else if (this.#k > 1) {
      this.#k = Math.max(1, this.#k >> 1);
    } else {
      this.#pause = this.#backoff;
      this.#backoff = Math.min(MAX_PAUSE, this.#backoff * 2);
    }
  }
}
