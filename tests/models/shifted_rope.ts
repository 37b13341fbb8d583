/**
 * A backend whose rope sees every position moved by `offset` while the KV cache and the
 * attention keep theirs. A step at positions 0..n-1 then computes what llama.cpp computes
 * for the same tokens at offset..offset+n-1 with nothing before them in its cache: its
 * causal mask covers only the cells that exist, where neuron's attention covers every
 * position from 0. So positions far beyond a model's original context (YaRN's 41k, 128k)
 * are compared without prefilling everything before them.
 */

import type { Backend, RopeSpec, StepLayout } from "../../src/backend/backend.ts";
import type { Activation } from "../../src/backend/backend.ts";

export interface ShiftedRope {
  backend: Backend;
  /** Added to every position the rope turns by; change it between steps. */
  offset: number;
}

/** `inner` with its rope shifted (it is closed with the returned backend). */
export function shiftedRope(inner: Backend): ShiftedRope {
  const shift: ShiftedRope = { backend: inner, offset: 0 };
  const rope = (x: Activation, layout: StepLayout, heads: number, dim: number, spec: RopeSpec) => {
    const positions = layout.positions.map((p) => p + shift.offset);
    inner.rope(x, { ...layout, positions }, heads, dim, spec);
  };
  shift.backend = new Proxy(inner, {
    get(target, prop) {
      if (prop === "rope") return rope;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return shift;
}
