/**
 * One sequence's constraint while it decodes: the grammar state after the tokens it took,
 * and before each token the mask of what may come next (token_masks.ts), applied to the
 * sampler's copy of the logits. End-of-generation tokens are allowed exactly when the
 * text so far is a whole sentence of the grammar. A thinking model's reasoning comes first
 * and is free (only ending the generation inside it is refused): the grammar starts after
 * the block closes.
 */

import type { TokenFilter } from "../engine/mod.ts";
import { ConstraintError } from "./errors.ts";
import { DEAD } from "./automaton.ts";
import { MaskBitsets } from "./mask_bitsets.ts";
import { nativeMasks } from "./native.ts";
import type { TokenMask, TokenMasks } from "./token_masks.ts";

/** Where the reasoning block of a thinking model stands when generation starts. */
export interface ReasoningTokens {
  /** `<think>` and `</think>`, as single tokens. */
  open: number;
  close: number;
  /** The prompt opened the block: the output starts as reasoning. */
  startInside: boolean;
  /** The output may open a block before the constrained text (the prompt did not close one). */
  mayOpen: boolean;
}

type Phase = "open" | "reasoning" | "grammar" | "done";

export class GrammarMatcher implements TokenFilter {
  readonly #masks: TokenMasks;
  readonly #eog: Int32Array;
  readonly #reasoning: ReasoningTokens | undefined;
  readonly #bitsets: MaskBitsets;
  #phase: Phase;
  #state: number;

  constructor(masks: TokenMasks, eogIds: Iterable<number>, reasoning?: ReasoningTokens) {
    this.#masks = masks;
    this.#eog = Int32Array.from(eogIds);
    this.#reasoning = reasoning;
    this.#state = masks.automaton.start;
    this.#phase = reasoning?.startInside ? "reasoning" : reasoning?.mayOpen ? "open" : "grammar";
    this.#bitsets = MaskBitsets.of(masks, this.#eog);
  }

  /** The constrained text is complete: nothing but the end may follow. */
  get complete(): boolean {
    return this.#phase === "done" ||
      (this.#phase === "grammar" && this.#masks.automaton.finished(this.#state));
  }

  restrict(logits: Float32Array, from = logits): boolean {
    switch (this.#phase) {
      case "done":
        return false;
      case "reasoning":
        if (from !== logits) logits.set(from.subarray(0, logits.length));
        for (const id of this.#eog) logits[id] = -Infinity;
        return true;
      case "open": {
        const mask = this.#masks.mask(this.#state);
        const bits = this.#bitsets.opening(this.#state, mask, this.#reasoning!.open);
        applyMask(logits, bits, from);
        return true;
      }
      case "grammar": {
        const mask = this.#masks.mask(this.#state);
        applyMask(logits, this.#bitsets.grammar(this.#state, mask), from);
        return this.#allowsAny(mask);
      }
    }
  }

  allowed(vocabSize: number): Uint32Array | null {
    if (vocabSize !== this.#bitsets.vocabSize) return null;
    switch (this.#phase) {
      case "done":
        return null;
      case "reasoning":
        return this.#bitsets.reasoning();
      case "open": {
        const mask = this.#masks.mask(this.#state);
        return this.#bitsets.opening(this.#state, mask, this.#reasoning!.open);
      }
      case "grammar": {
        const mask = this.#masks.mask(this.#state);
        return this.#allowsAny(mask) ? this.#bitsets.grammar(this.#state, mask) : null;
      }
    }
  }

  accept(id: number): void {
    switch (this.#phase) {
      case "done":
        return;
      case "reasoning":
        if (id === this.#reasoning!.close) this.#phase = "grammar";
        return;
      case "open":
        if (id === this.#reasoning!.open) {
          this.#phase = "reasoning";
          return;
        }
        this.#phase = "grammar";
        break;
      case "grammar":
        break;
    }
    if (this.#eog.includes(id)) {
      this.#phase = "done";
      return;
    }
    const next = this.#masks.automaton.walk(this.#state, this.#masks.trie.pieces[id]);
    if (next === DEAD) {
      throw new ConstraintError(
        "invalid_grammar",
        `token ${id} does not continue the grammar: it was not allowed`,
      );
    }
    this.#state = next;
  }

  admits(ids: readonly number[]): number {
    let phase = this.#phase;
    let state = this.#state;
    const reasoning = this.#reasoning;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (phase === "done") return i;
      if (phase === "reasoning") {
        if (this.#eog.includes(id)) return i;
        if (id === reasoning!.close) phase = "grammar";
        continue;
      }
      if (phase === "open" && id === reasoning!.open) {
        phase = "reasoning";
        continue;
      }
      phase = "grammar";
      if (!has(this.#bitsets.grammar(state, this.#masks.mask(state)), id)) return i;
      if (this.#eog.includes(id)) {
        phase = "done";
        continue;
      }
      state = this.#masks.automaton.walk(state, this.#masks.trie.pieces[id]);
      if (state === DEAD) return i;
    }
    return ids.length;
  }

  /** Whether `mask` lets any token through, an end of generation counting. */
  #allowsAny(mask: TokenMask): boolean {
    return mask.count > 0 || (mask.accepting && this.#eog.length > 0);
  }
}

/** Whether bit `id` of `bits` is set. */
function has(bits: Uint32Array, id: number): boolean {
  return (bits[id >>> 5] & (1 << (id & 31))) !== 0;
}

/**
 * `logits` becomes `from` (by default itself) with every logit whose bit is clear at
 * -Infinity, in one pass natively where the library opens; a row longer than the
 * vocabulary (padded output rows) is forbidden past it.
 */
export function applyMask(logits: Float32Array, bits: Uint32Array, from = logits): void {
  const native = nativeMasks();
  if (native === null) {
    if (from !== logits) logits.set(from.subarray(0, logits.length));
    return applyBits(logits, bits);
  }
  const n = Math.min(logits.length, from.length, bits.length * 32);
  native.nk_token_mask_apply(logits, from, bits, BigInt(n));
  logits.fill(-Infinity, n);
}

/** applyMask's reference: visits only the clear bits. */
export function applyBits(logits: Float32Array, bits: Uint32Array): void {
  const n = logits.length;
  logits.fill(-Infinity, bits.length * 32);
  for (let w = 0; w < bits.length; w++) {
    const base = w << 5;
    for (let clear = ~bits[w]; clear !== 0; clear &= clear - 1) {
      const i = base + 31 - Math.clz32(clear & -clear);
      if (i < n) logits[i] = -Infinity;
    }
  }
}
