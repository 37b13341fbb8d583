/**
 * What the engine's steps did, counted for its stats: tokens and seconds split between
 * prompt and decode positions, steps stopped early, and speculation's verifications.
 */

/** The counted part of EngineStats. */
export interface StepCounts {
  prefillTokens: number;
  prefillSeconds: number;
  decodeTokens: number;
  decodeSeconds: number;
  steps: number;
  meanBatchTokens: number;
  interruptedSteps: number;
  specVerifications: number;
  specDrafted: number;
  specAccepted: number;
  specTokens: number;
}

export class StepCounters {
  prefillTokens = 0;
  prefillSeconds = 0;
  decodeTokens = 0;
  decodeSeconds = 0;
  steps = 0;
  stepTokens = 0;
  interruptedSteps = 0;
  specVerifications = 0;
  specDrafted = 0;
  specAccepted = 0;
  specTokens = 0;

  /**
   * A step's tokens, its time split by positions fed; drafted tokens the verifications
   * rejected took time but are no decoded tokens.
   */
  step(prefill: number, decode: number, rejected: number, seconds: number): void {
    const total = prefill + decode;
    if (total === 0) return;
    this.steps++;
    this.stepTokens += total;
    this.prefillTokens += prefill;
    this.prefillSeconds += (seconds * prefill) / total;
    this.decodeTokens += decode - rejected;
    this.decodeSeconds += (seconds * decode) / total;
  }

  /** One draft of `drafted` tokens verified: `accepted` of them, `tokens` taken in all. */
  verification(drafted: number, accepted: number, tokens: number): void {
    this.specVerifications++;
    this.specDrafted += drafted;
    this.specAccepted += accepted;
    this.specTokens += tokens;
  }

  counts(): StepCounts {
    const { stepTokens, ...counts } = this;
    return { ...counts, meanBatchTokens: this.steps === 0 ? 0 : stepTokens / this.steps };
  }
}
