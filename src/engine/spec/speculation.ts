/**
 * One sequence's speculative decoding: what it asked for, where its drafts come from
 * (prompt lookup, ngram.ts) and how long they may be (draft_policy.ts). Verification is
 * the engine's: a draft of k tokens rides in the sequence's decode run as k more
 * positions, and every row is sampled as if the tokens had come one at a time (engine.ts).
 */

import type { TokenFilter } from "../request.ts";
import { DraftPolicy } from "./draft_policy.ts";
import { NgramIndex } from "./ngram.ts";

/**
 * Speculation as a request (or a model's default) asks for it. `draft` needs a draft
 * model loaded beside the target.
 */
export interface SpeculativeParams {
  mode: SpeculativeMode;
  /** Tokens drafted per verification at most. */
  k: number;
  /** Longest n-gram matched (down to min(n, 3)). */
  n: number;
  /** Whether k adapts to how drafts fare (default true; false keeps k: tests, benchmarks). */
  adaptive?: boolean;
}

export const SPECULATIVE_MODES = ["ngram", "draft", "off"] as const;
export type SpeculativeMode = (typeof SPECULATIVE_MODES)[number];

/** Draft length at most, in the API and config. */
export const MAX_DRAFT_TOKENS = 16;
/** Longest n-gram in the API and config. */
export const MAX_NGRAM = 16;
/** Shortest n-gram matched when a longer one is asked for: shorter ones match by chance. */
const MIN_NGRAM = 3;

/**
 * Decode rows (tokens and drafts) a step carries at most for speculation: drafts share what
 * is left after every decoding sequence's own row, so speculation fades as the batch grows,
 * where the step's products stop being bound by reading the weights and extra rows cost.
 */
export const SPECULATION_ROWS = 12;

/** Tokens each of `decoding` sequences may draft in one step (0 for a large batch). */
export function draftShare(decoding: number): number {
  return decoding === 0 ? 0 : Math.max(0, Math.floor((SPECULATION_ROWS - decoding) / decoding));
}

/** What speculation asked for without saying more gets; a model's default mode is off. */
const DEFAULTS: SpeculativeParams = { mode: "off", k: 6, n: 5 };

/** A request's speculation over its model's default, field by field, over DEFAULTS. */
export function resolveSpeculation(
  model: Partial<SpeculativeParams> | undefined,
  request: Partial<SpeculativeParams> | undefined,
): SpeculativeParams {
  const out = { ...DEFAULTS };
  for (const given of [model, request]) {
    for (const [key, value] of Object.entries(given ?? {})) {
      if (value !== undefined) Object.assign(out, { [key]: value });
    }
  }
  return out;
}

export class Speculation {
  readonly #index: NgramIndex;
  readonly #policy: DraftPolicy;

  constructor(params: SpeculativeParams) {
    this.#index = new NgramIndex({ min: Math.min(params.n, MIN_NGRAM), max: params.n });
    this.#policy = new DraftPolicy(params.k, params.adaptive ?? true);
  }

  /**
   * The draft for this decode step after `tokens`: at most `most` tokens and as many as
   * the policy allows now, cut before the first one `filter` would refuse.
   */
  draft(tokens: readonly number[], most: number, filter: TokenFilter | undefined): number[] {
    const k = Math.min(most, this.#policy.next());
    const draft = this.#index.propose(tokens, k);
    if (filter?.admits && draft.length > 0) draft.length = filter.admits(draft);
    return draft;
  }

  /** A verification took `accepted` of the `drafted` tokens. */
  observe(drafted: number, accepted: number): void {
    this.#policy.observe(drafted, accepted);
  }
}
