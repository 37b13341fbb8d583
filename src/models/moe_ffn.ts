/**
 * The routed-experts FFN sublayer of a mixture-of-experts decoder, as llama.cpp's
 * build_moe_ffn computes it (softmax gating, SiLU experts):
 *
 *   p         = softmax(Wrouter · n)                   one probability per expert
 *   e_1..e_k  = the k experts of highest p             w_j = p(e_j) / Σ p(e_i) (normalised)
 *   proj      = Σ_j w_j · Wdown[e_j] · (silu(Wgate[e_j] · n) * (Wup[e_j] · n))
 *
 * Under tensor parallelism the router is whole on every rank (every rank routes alike)
 * and each holds a slice of every expert's columns: proj is then a partial sum, added
 * over the ranks by the caller. The scratch it needs grows with the step.
 */

import type { Activation, Backend, ExpertWeight, Weight } from "../backend/backend.ts";
import type { MoeHparams } from "./moe_hparams.ts";
import type { WeightLoader } from "./weights.ts";

/** The router and experts of one layer (this rank's columns of each expert). */
export interface MoeWeights {
  router: Weight;
  gateExps: ExpertWeight;
  upExps: ExpertWeight;
  downExps: ExpertWeight;
}

/** Binds the router and experts of layer `i`. */
export function loadMoe(w: WeightLoader, hp: MoeHparams, i: number): MoeWeights {
  const b = `blk.${i}`;
  const { nEmbd, nFf } = hp;
  const n = hp.experts.count;
  return {
    router: w.weight(`${b}.ffn_gate_inp.weight`, nEmbd, n),
    gateExps: w.experts(`${b}.ffn_gate_exps.weight`, nEmbd, nFf, n, w.byRows),
    upExps: w.experts(`${b}.ffn_up_exps.weight`, nEmbd, nFf, n, w.byRows),
    downExps: w.experts(`${b}.ffn_down_exps.weight`, nFf, nEmbd, n, w.byCols),
  };
}

interface Scratch {
  tokens: number;
  logits: Activation;
  ids: Activation;
  weights: Activation;
  gate: Activation;
  up: Activation;
  down: Activation;
}

export class MoeFfn {
  #scratch: Scratch | null = null;

  /** `nFf`: the expert columns this rank holds. */
  constructor(
    private readonly backend: Backend,
    private readonly hp: MoeHparams,
    private readonly nFf: number,
  ) {}

  /** Makes room for steps of `tokens` rows (before the step's ops are issued). */
  reserve(tokens: number): void {
    if (this.#scratch !== null && this.#scratch.tokens >= tokens) return;
    this.free();
    const be = this.backend;
    const { count, used } = this.hp.experts;
    this.#scratch = {
      tokens,
      logits: be.activation(tokens, count),
      ids: be.activation(tokens, used),
      weights: be.activation(tokens, used),
      gate: be.activation(tokens * used, this.nFf),
      up: be.activation(tokens * used, this.nFf),
      down: be.activation(tokens * used, this.hp.nEmbd),
    };
  }

  /** proj = the experts' weighted sum for the rows of n (this rank's part of it). */
  run(proj: Activation, n: Activation, w: MoeWeights): void {
    const be = this.backend;
    const s = this.#scratch;
    if (s === null || s.tokens < n.rows) throw new RangeError(`MoeFfn: no room for ${n.rows} rows`);
    const t = n.rows;
    const k = this.hp.experts.used;
    const logits = be.rowsOf(s.logits, t);
    const ids = be.rowsOf(s.ids, t);
    const weights = be.rowsOf(s.weights, t);
    const gate = be.rowsOf(s.gate, t * k);
    const up = be.rowsOf(s.up, t * k);
    const down = be.rowsOf(s.down, t * k);
    be.matmul(logits, w.router, n);
    be.routeExperts(ids, weights, logits, true);
    be.matmulExperts([gate, up], [w.gateExps, w.upExps], n, ids);
    be.siluMul(gate, gate, up);
    be.matmulExperts([down], [w.downExps], gate, ids);
    be.combineExperts(proj, down, weights);
  }

  free(): void {
    const s = this.#scratch;
    if (s === null) return;
    for (const a of [s.logits, s.ids, s.weights, s.gate, s.up, s.down]) this.backend.free(a);
    this.#scratch = null;
  }
}
