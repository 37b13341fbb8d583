/**
 * The speeds `neuron generate` reports after the text, as llama.cpp's llama-simple does: the
 * prompt's evaluation runs from the request's acceptance to the first generated token (the
 * prompt's last logits yield it); every later token costs one decode step.
 */
import type { GenerationEvent } from "../frontend/mod.ts";

export class SpeedMeter {
  #accepted = NaN;
  #first = NaN;
  #last = NaN;
  #promptTokens = 0;
  #generated = 0;

  /** The request of `promptTokens` was accepted (tokenized, queued) at `now` (ms). */
  accepted(promptTokens: number, now: number): void {
    this.#accepted = now;
    this.#promptTokens = promptTokens;
  }

  /** Notes `event`, which arrived at `now` (ms, e.g. performance.now()). */
  observe(event: GenerationEvent, now: number): void {
    if (event.type === "delta" && event.tokens.length > 0) {
      if (this.#generated === 0) this.#first = now;
      this.#generated += event.tokens.length;
      this.#last = now;
    }
  }

  /** Two lines: the prompt's evaluation, then the decode steps of the generation. */
  lines(): string[] {
    const steps = Math.max(0, this.#generated - 1);
    return [
      `prompt: ${this.#promptTokens} tokens in ${
        rate(this.#promptTokens, this.#first - this.#accepted)
      }`,
      `generation: ${this.#generated} tokens, ${steps} decode steps in ${
        rate(steps, this.#last - this.#first)
      }`,
    ];
  }
}

function rate(tokens: number, ms: number): string {
  const elapsed = Number.isFinite(ms) ? ms : 0;
  const perSecond = tokens > 0 && elapsed > 0 ? (tokens * 1000 / elapsed).toFixed(2) : "-";
  return `${elapsed.toFixed(2)} ms, ${perSecond} tokens/s`;
}
