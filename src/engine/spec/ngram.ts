/**
 * Prompt-lookup drafting (llama.cpp's `--spec` n-gram, vLLM's `ngram`): the last n tokens
 * of a sequence are looked up in everything before them (prompt and output), and the
 * tokens that followed their latest earlier occurrence are proposed as the next ones. Code
 * edits, JSON that echoes its input and quoted passages repeat their context at length,
 * and there a model's next tokens are often exactly these.
 *
 * The index is built as the sequence grows, so a lookup costs O(n) whatever its length.
 */

/** How long the matched n-grams are, longest tried first. */
export interface NgramRange {
  min: number;
  max: number;
}

export class NgramIndex {
  readonly #range: NgramRange;
  /** Per n (index n - min): n-gram -> the position right after its latest occurrence. */
  readonly #follows: Map<string, number>[];
  /** Positions whose following token is indexed: n-grams ending before it are recorded. */
  #indexed = 0;

  constructor(range: NgramRange) {
    if (!(range.min >= 1 && range.max >= range.min)) {
      throw new RangeError(`bad n-gram range ${range.min}..${range.max}`);
    }
    this.#range = range;
    this.#follows = Array.from({ length: range.max - range.min + 1 }, () => new Map());
  }

  /**
   * Up to `k` tokens that followed the latest earlier occurrence of the longest suffix of
   * `tokens` (of `min`..`max` tokens) found before; none without a match. The proposal
   * may run into itself (a copy that overlaps its source, as LZ77's does), so a sequence
   * caught in a loop is proposed the loop's next turn.
   */
  propose(tokens: readonly number[], k: number): number[] {
    const length = tokens.length;
    this.#index(tokens, length - 1);
    if (k <= 0) return [];
    const { min, max } = this.#range;
    for (let n = Math.min(max, length - 1); n >= min; n--) {
      const next = this.#follows[n - min].get(gramKey(tokens, length - n, n));
      if (next === undefined) continue;
      const out: number[] = [];
      for (let j = 0; j < k; j++) {
        const from = next + j;
        out.push(from < length ? tokens[from] : out[from - length]);
      }
      return out;
    }
    return [];
  }

  /** Records every n-gram that ends before position `until` (each followed by a token). */
  #index(tokens: readonly number[], until: number): void {
    const { min } = this.#range;
    for (let end = this.#indexed; end < until; end++) {
      // The n-gram [end - n + 1, end] is followed by position end + 1.
      for (let i = 0; i < this.#follows.length; i++) {
        const n = min + i;
        if (end + 1 < n) break;
        this.#follows[i].set(gramKey(tokens, end + 1 - n, n), end + 1);
      }
    }
    this.#indexed = Math.max(this.#indexed, until);
  }
}

function gramKey(tokens: readonly number[], start: number, n: number): string {
  let key = "";
  for (let i = start; i < start + n; i++) key += tokens[i] + ",";
  return key;
}
