/**
 * Stop strings across token boundaries. Text is released only once it can no longer be
 * the start of a stop string, so a stop string split over several tokens is never
 * emitted; when one completes, everything before it is released and generation ends.
 */

export interface StopResult {
  /** Text safe to emit now. */
  text: string;
  /** A stop string completed; `text` ends just before it. */
  stopped: boolean;
}

export class StopMatcher {
  readonly #stops: string[];
  #held = "";

  constructor(stops: readonly string[]) {
    this.#stops = stops.filter((s) => s.length > 0);
  }

  push(piece: string): StopResult {
    if (this.#stops.length === 0) return { text: piece, stopped: false };
    const text = this.#held + piece;
    let cut = -1;
    for (const s of this.#stops) {
      const at = text.indexOf(s);
      if (at !== -1 && (cut === -1 || at < cut)) cut = at;
    }
    if (cut !== -1) {
      this.#held = "";
      return { text: text.slice(0, cut), stopped: true };
    }
    const keep = this.#partialSuffix(text);
    this.#held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** Releases what was held back (generation ended for another reason). */
  finish(): string {
    const rest = this.#held;
    this.#held = "";
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of a stop string. */
  #partialSuffix(text: string): number {
    let best = 0;
    for (const s of this.#stops) {
      for (let n = Math.min(s.length - 1, text.length); n > best; n--) {
        if (text.endsWith(s.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
