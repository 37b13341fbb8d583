/**
 * What the renderers share for requests of several choices (`n`): which choice an event
 * belongs to, and the usage of the whole generation, which sums its choices' (the prompt
 * is counted by the first choice only).
 */

import type { GenerationEvent, UsageCounts } from "./generation.ts";

/** The index of the choice an event belongs to. */
export function choiceOf(e: GenerationEvent): number {
  return e.choice ?? 0;
}

/** Sums the usage reported by each choice's `done`. */
export class UsageTotal {
  readonly counts: UsageCounts = {
    promptTokens: 0,
    completionTokens: 0,
    cachedTokens: 0,
    reasoningTokens: 0,
  };

  add(u: UsageCounts): void {
    this.counts.promptTokens += u.promptTokens;
    this.counts.completionTokens += u.completionTokens;
    this.counts.cachedTokens += u.cachedTokens;
    this.counts.reasoningTokens += u.reasoningTokens;
  }
}
