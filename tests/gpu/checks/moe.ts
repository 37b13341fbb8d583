/**
 * The mixture-of-experts ops against the reference: routing (the same experts in the same
 * order, ties included, weights to an ulp or two), the experts' products for every type
 * family (q8_1 units, float rows, any width) with one expert or many per slot group and x
 * shared by a token's slots or one row per slot, experts loaded from a strided slice, the
 * weighted sum bit for bit, and the whole sublayer chained on ids that never leave the
 * device.
 */

import type { Activation, ExpertSource, ExpertWeight } from "../../../src/backend/backend.ts";
import { randomBlocks } from "../../../src/gguf/quant/random.ts";
import { rowBytes } from "../../../src/gguf/types.ts";
import { assertEquals } from "../../support/assert.ts";
import { expertsTiled, matvecPlan } from "../../../src/backend/cuda/matmul_plan.ts";
import { type Both, type Pair, randomF32, typeNamed } from "./pair.ts";

/** Expert stacks of every family the kernels have: q8_1 units, float rows, any width. */
export const EXPERT_TYPES = ["Q4_K", "Q6_K", "Q8_0", "Q4_0", "F16", "F32"] as const;
/** The q8_1 unit types only the tiled products' case checks besides (tiles.cuh's others). */
export const TILED_ONLY_TYPES = ["Q5_K", "Q3_K", "Q4_1", "Q5_0", "Q5_1"] as const;

function experts(pair: Pair, type: string, experts: number, rows: number, cols: number) {
  const info = typeNamed(type);
  const rb = rowBytes(info, cols);
  // A strided source (a rank's slice of each expert): the backends pack it.
  const stride = rows * rb + 64;
  const bytes = new Uint8Array(experts * stride);
  for (let e = 0; e < experts; e++) {
    bytes.set(randomBlocks(info, (rows * cols) / info.blockSize, pair.rng), e * stride);
  }
  const src: ExpertSource = {
    name: `experts_${type}`,
    type: info,
    rows,
    cols,
    experts,
    expertStride: stride,
    bytes,
    pointer: Deno.UnsafePointer.of(bytes)!,
  };
  return {
    keep: bytes,
    dev: pair.dev.loadExperts(src),
    ref: pair.ref.loadExperts(src),
  } as Both<ExpertWeight> & { keep: Uint8Array };
}

/** Routed ids and weights of `tokens` rows over `n` experts, on both backends. */
function route(pair: Pair, tokens: number, n: number, k: number, tied: boolean) {
  const logits = randomF32(pair.rng, tokens * n, 2);
  if (tied) { for (let i = 0; i < logits.length; i++) logits[i] = Math.round(logits[i] * 2) / 4; }
  const l = pair.upload(logits, tokens, n);
  const ids = pair.activation(tokens, k);
  const weights = pair.activation(tokens, k);
  pair.dev.routeExperts(ids.dev, weights.dev, l.dev, true);
  pair.ref.routeExperts(ids.ref, weights.ref, l.ref, true);
  return { ids, weights };
}

export function checkRouting(pair: Pair): void {
  for (
    const [tokens, n, k, tied] of [[1, 128, 8, false], [9, 16, 4, true], [
      5,
      512,
      16,
      true,
    ]] as const
  ) {
    const { ids, weights } = route(pair, tokens, n, k, tied);
    const i = pair.read(ids);
    assertEquals([...i.dev], [...i.ref], `routeExperts ${tokens}x${n} top ${k}: experts`);
    pair.check(`routeExperts ${tokens}x${n} top ${k}: weights`, weights, 1e-6);
  }
}

/**
 * One token (decode), a few, many sharing experts (several slots per group), and enough
 * that every expert has dozens (the tiled products, over two row tiles and, for the
 * 32-value types, a partial column tile); `tiledOnly` checks that last case alone.
 */
export function checkMatmulExperts(pair: Pair, type: string, tiledOnly = false): void {
  const info = typeNamed(type);
  // Rows of 8 to 16 units (threads per row as many), and Q6_K's of 32 (a warp per row).
  const cols = type === "Q6_K" ? 1024 : info.blockSize === 256 ? 512 : 96;
  const rows = 72;
  const n = 8;
  const stack = experts(pair, type, n, rows, cols);
  const tiled = [96, 3] as const;
  const plan = matvecPlan(info, cols);
  assertEquals(
    expertsTiled(plan, tiled[0] * tiled[1], n),
    plan.kind === "q8" && type !== "Q2_K",
    `${type}: the tiled case takes the tiled products`,
  );
  const cases = tiledOnly ? [tiled] : [[1, 4], [3, 2], [21, 3], tiled] as const;
  for (const [tokens, k] of cases) {
    const { ids } = route(pair, tokens, n, k, false);
    for (const perSlot of [false, true]) {
      const x = pair.random(perSlot ? tokens * k : tokens, cols);
      const out = pair.activation(tokens * k, rows);
      pair.dev.matmulExperts([out.dev], [stack.dev], x.dev, ids.dev);
      pair.ref.matmulExperts([out.ref], [stack.ref], x.ref, ids.ref);
      const bound = info.blockSize === 1 ? 1e-5 : 0.05;
      pair.check(`matmulExperts ${type} ${tokens}x${k} perSlot=${perSlot}`, out, bound);
    }
  }
}

/**
 * A routed Q4_K expert product of `tokens` rows (routeExperts, then matmulExperts) checked
 * against the reference; returns what `launches` (the device backend's launch counter)
 * grew by over the two ops.
 */
export function routedProduct(pair: Pair, tokens: number, launches: () => number): number {
  const [n, k, rows, cols] = [8, 2, 64, 256];
  const stack = experts(pair, "Q4_K", n, rows, cols);
  const logits = pair.upload(randomF32(pair.rng, tokens * n, 2), tokens, n);
  const x = pair.random(tokens, cols);
  const [ids, weights] = [pair.activation(tokens, k), pair.activation(tokens, k)];
  const out = pair.activation(tokens * k, rows);
  pair.read(x);
  const before = launches();
  for (const side of ["dev", "ref"] as const) {
    pair[side].routeExperts(ids[side], weights[side], logits[side], true);
    pair[side].matmulExperts([out[side]], [stack[side]], x[side], ids[side]);
  }
  pair.check(`routed expert product of ${tokens} tokens`, out, 0.05);
  return launches() - before;
}

export function checkCombine(pair: Pair): void {
  const [tokens, k, cols] = [5, 8, 300];
  const e = pair.random(tokens * k, cols);
  const w = pair.random(tokens, k, 0.3);
  const out = pair.activation(tokens, cols);
  pair.dev.combineExperts(out.dev, e.dev, w.dev);
  pair.ref.combineExperts(out.ref, e.ref, w.ref);
  const got = pair.read(out);
  assertEquals(got.dev, got.ref, "combineExperts: bit for bit");
}

/**
 * The whole sublayer (moe_ffn.ts's order of ops) with ids produced and read on the device;
 * returns the device's gate, up, down and output rows (fused and unfused runs compare them).
 */
export function checkMoeSublayer(pair: Pair): Float32Array[] {
  const [d, ff, n, k, tokens] = [256, 512, 16, 4, 6];
  const router = pair.randomWeight(typeNamed("F32"), n, d, 0.5);
  const gate = experts(pair, "Q4_K", n, ff, d);
  const up = experts(pair, "Q4_K", n, ff, d);
  const down = experts(pair, "Q6_K", n, d, ff);
  const x = pair.random(tokens, d);
  const a = (rows: number, cols: number) => pair.activation(rows, cols);
  const [logits, ids, weights] = [a(tokens, n), a(tokens, k), a(tokens, k)];
  const [g, u, dn, out] = [a(tokens * k, ff), a(tokens * k, ff), a(tokens * k, d), a(tokens, d)];
  for (const side of ["dev", "ref"] as const) {
    const be = pair[side];
    const s = <T>(v: Both<T>): T => v[side];
    be.matmul(s(logits), s(router), s(x));
    be.routeExperts(s(ids), s(weights), s(logits), true);
    be.matmulExperts([s(g), s(u)], [s(gate), s(up)], s(x), s(ids));
    be.siluMul(s(g), s(g), s(u));
    be.matmulExperts([s(dn)], [s(down)], s(g), s(ids));
    be.combineExperts(s(out) as Activation, s(dn), s(weights));
  }
  const i = pair.read(ids);
  assertEquals([...i.dev], [...i.ref], "sublayer: experts");
  pair.check("sublayer output", out, 0.05);
  return [g, u, dn, out].map((v) => pair.read(v).dev);
}
