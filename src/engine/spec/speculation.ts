/**
 * One sequence's speculative decoding: what it asked for, where its drafts come from
 * (prompt lookup, ngram.ts, or a draft model, draft_model.ts) and how long they may be
 * (draft_policy.ts). Verification is
 * the engine's: a draft of k tokens rides in the sequence's decode run as k more
 * positions, and every row is sampled as if the tokens had come one at a time (engine.ts).
 */

import type { TokenFilter } from "../token_filter.ts";
import { DraftPolicy } from "./draft_policy.ts";
import { NgramIndex } from "./ngram.ts";

/**
 * Speculation as a request (or a model's default) asks for it. `draft` needs a draft
 * model loaded beside the target (`n` is prompt lookup's only).
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
  /** Where drafts come from: prompt lookup here, or the engine's draft model. */
  readonly source: "ngram" | "draft";
  readonly #index: NgramIndex | null;
  readonly #policy: DraftPolicy;

  constructor(params: SpeculativeParams & { mode: "ngram" | "draft" }) {
    this.source = params.mode;
    this.#index = params.mode === "ngram"
      ? new NgramIndex({ min: Math.min(params.n, MIN_NGRAM), max: params.n })
      : null;
    this.#policy = new DraftPolicy(params.k, params.adaptive ?? true);
  }

  /** How many tokens this decode step may draft: at most `most`, as the policy allows now. */
  length(most: number): number {
    return Math.min(most, this.#policy.next());
  }

  /** Prompt lookup's draft of `k` tokens after `tokens` (none for a draft model's). */
  lookup(tokens: readonly number[], k: number): number[] {
    return this.#index?.propose(tokens, k) ?? [];
  }

  /** `draft` cut before the first token `filter` would refuse. */
  cut(draft: number[], filter: TokenFilter | undefined): number[] {
    if (filter?.admits && draft.length > 0) draft.length = filter.admits(draft);
    return draft;
  }

  /** A verification took `accepted` of the `drafted` tokens. */
  observe(drafted: number, accepted: number): void {
    this.#policy.observe(drafted, accepted);
  }
}
