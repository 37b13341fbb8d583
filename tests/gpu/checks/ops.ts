/**
 * The small ops against the reference: RMSNorm (per token and per head, narrow and wide),
 * SiLU and GELU gates, add, bias, scale, the Walsh-Hadamard rotation, row gather, embedding
 * lookups from quantized tables, and greedy argmax on the device. RoPE is rope.ts's.
 */

import { argmax, maskedArgmax } from "../../../src/common/argmax.ts";
import { GgmlType, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { f32ToF16 } from "../../../src/gguf/half.ts";
import type { Activation, Backend } from "../../../src/backend/backend.ts";
import { assert, assertEquals, assertThrows } from "../../support/assert.ts";
import { assertClose, type Pair, randomF32, source, typeNamed } from "./pair.ts";

const EXACT = 1e-6;
const NORM = 1e-5;

export function checkRmsNorm(pair: Pair): void {
  const cases: Array<[rows: number, cols: number, dim: number]> = [
    [5, 96, 96],
    [3, 96, 32],
    [2, 320, 320],
    [1, 4096, 4096],
    [7, 640, 64],
  ];
  for (const [rows, cols, dim] of cases) {
    // An F16 norm weight: the backend must expand vectors to f32 at load.
    const g = Float32Array.from(randomF32(pair.rng, dim, 0.3), (v) => 1 + v);
    const bytes = new Uint8Array(dim * 2);
    const view = new DataView(bytes.buffer);
    g.forEach((v, i) => view.setUint16(2 * i, f32ToF16(v), true));
    const w = pair.weight(source("norm", ggmlTypeInfo(GgmlType.F16)!, 1, dim, bytes));
    const x = pair.random(rows, cols, 3);
    const out = pair.activation(rows, cols);
    pair.dev.rmsNorm(out.dev, x.dev, w.dev, dim, 1e-6);
    pair.ref.rmsNorm(out.ref, x.ref, w.ref, dim, 1e-6);
    pair.check(`rmsNorm ${rows}x${cols} by ${dim}`, out, NORM);
    pair.dev.rmsNorm(x.dev, x.dev, w.dev, dim, 1e-5);
    pair.ref.rmsNorm(x.ref, x.ref, w.ref, dim, 1e-5);
    pair.check(`rmsNorm in place ${rows}x${cols} by ${dim}`, x, NORM);
  }
}

export function checkElementwise(pair: Pair): void {
  const [rows, cols] = [3, 77];
  const a = pair.random(rows, cols, 4);
  const b = pair.random(rows, cols);
  const out = pair.activation(rows, cols);
  pair.dev.siluMul(out.dev, a.dev, b.dev);
  pair.ref.siluMul(out.ref, a.ref, b.ref);
  pair.check("siluMul", out, EXACT);
  pair.dev.siluMul(a.dev, a.dev, b.dev);
  pair.ref.siluMul(a.ref, a.ref, b.ref);
  pair.check("siluMul in place", a, EXACT);
  pair.dev.add(out.dev, a.dev, b.dev);
  pair.ref.add(out.ref, a.ref, b.ref);
  pair.check("add", out, EXACT);
  pair.dev.add(a.dev, a.dev, out.dev);
  pair.ref.add(a.ref, a.ref, out.ref);
  pair.check("add in place", a, EXACT);
  const g = pair.random(rows, cols, 4);
  pair.dev.geluMul(out.dev, g.dev, b.dev);
  pair.ref.geluMul(out.ref, g.ref, b.ref);
  pair.check("geluMul", out, EXACT);
  pair.dev.geluMul(g.dev, g.dev, b.dev);
  pair.ref.geluMul(g.ref, g.ref, b.ref);
  pair.check("geluMul in place", g, EXACT);
  // Gemma's GELU saturates: far out it is x (gate above 0) or 0 (below).
  const wide = pair.upload(Float32Array.from([-30, -8, -3, -0.5, 0, 0.5, 3, 8, 30]), 1, 9);
  const ones = pair.upload(new Float32Array(9).fill(1), 1, 9);
  const w = pair.activation(1, 9);
  pair.dev.geluMul(w.dev, wide.dev, ones.dev);
  pair.ref.geluMul(w.ref, wide.ref, ones.ref);
  pair.check("geluMul far from 0", w, EXACT);
  // Exact sums and products of equal inputs (a and b are no longer equal on both sides).
  const c = pair.random(rows, cols);
  const f32 = ggmlTypeInfo(GgmlType.F32)!;
  const biasValues = new Uint8Array(randomF32(pair.rng, cols).buffer);
  const bias = pair.weight(source("bias", f32, 1, cols, biasValues));
  pair.dev.addBias(out.dev, c.dev, bias.dev);
  pair.ref.addBias(out.ref, c.ref, bias.ref);
  pair.check("addBias", out, 0);
  pair.dev.addBias(c.dev, c.dev, bias.dev);
  pair.ref.addBias(c.ref, c.ref, bias.ref);
  pair.check("addBias in place", c, 0);
  pair.dev.scale(out.dev, c.dev, Math.sqrt(cols));
  pair.ref.scale(out.ref, c.ref, Math.sqrt(cols));
  pair.check("scale", out, EXACT);
  pair.dev.scale(c.dev, c.dev, -0.125);
  pair.ref.scale(c.ref, c.ref, -0.125);
  pair.check("scale in place", c, 0);
}

/**
 * The Walsh-Hadamard rotation (the chunks a quantized KV cache turns heads by, and the
 * smallest and largest others), within `bound` of pair.ref, and twice over the input
 * back (H is its own inverse). Wrong chunk sizes are refused by both.
 */
export function checkHadamard(pair: Pair, bound = NORM): void {
  const cases: Array<[rows: number, cols: number, n: number]> = [
    [1, 2048, 128],
    [3, 1024, 64],
    [40, 1024, 128],
    [2, 64, 2],
    [1, 1024, 1024],
  ];
  for (const [rows, cols, n] of cases) {
    const data = randomF32(pair.rng, rows * cols, 2);
    // An outlier feature: what the rotation exists to spread.
    data[5] = 60;
    const x = pair.upload(data, rows, cols);
    pair.dev.hadamard(x.dev, n);
    pair.ref.hadamard(x.ref, n);
    pair.check(`hadamard ${rows}x${cols} by ${n}`, x, bound);
    pair.dev.hadamard(x.dev, n);
    assertClose(`hadamard twice ${rows}x${cols} by ${n}`, pair.dev.read(x.dev), data, NORM);
  }
  const x = pair.random(2, 192);
  for (const n of [3, 96, 256, 0]) {
    for (const [be, a] of [[pair.dev, x.dev], [pair.ref, x.ref]] as const) {
      const err = assertThrows(() => be.hadamard(a, n));
      assert(err.message.includes(`chunk ${n}`), err.message);
    }
  }
}

export function checkGatherAndEmbed(pair: Pair): void {
  const a = pair.random(9, 300);
  const rows = Int32Array.from([8, 0, 3, 3]);
  const out = pair.activation(4, 300);
  pair.dev.gatherRows(out.dev, a.dev, rows);
  pair.ref.gatherRows(out.ref, a.ref, rows);
  pair.check("gatherRows", out, 0);
  for (const t of ["Q8_0", "Q4_K", "Q6_K", "Q5_0", "F16", "BF16", "Q3_K"]) {
    const type = typeNamed(t);
    const cols = type.blockSize === 256 ? 512 : 96;
    const table = pair.randomWeight(type, 23, cols);
    const ids = Int32Array.from([22, 0, 5, 5, 11]);
    const e = pair.activation(ids.length, cols);
    pair.dev.embed(e.dev, table.dev, ids);
    pair.ref.embed(e.ref, table.ref, ids);
    pair.check(`embed from ${t}`, e, EXACT);
  }
}

interface Argmaxer {
  argmaxRows(a: Activation, masks?: readonly (Uint32Array | null)[]): Int32Array;
}

function hasArgmax(b: Backend): b is Backend & Argmaxer {
  return typeof (b as Partial<Argmaxer>).argmaxRows === "function";
}

/** Device argmax equals the host's (first index on ties) on rows with planted ties. */
export function checkArgmax(pair: Pair): void {
  if (!hasArgmax(pair.dev)) return;
  const [rows, cols] = [5, 151936];
  const data = randomF32(pair.rng, rows * cols);
  data[cols + 777] = 9;
  data[cols + 150000] = 9;
  data[2 * cols + cols - 1] = 12;
  // A row of -inf with NaNs in every part of the row the device splits it into: NaN never
  // wins, so the first -inf does.
  data.fill(-Infinity, 4 * cols, 5 * cols);
  for (let c = 3; c < cols; c += 1000) data[4 * cols + c] = NaN;
  const a = pair.upload(data, rows, cols);
  const want = Array.from(
    { length: rows },
    (_, r) => argmax(data.subarray(r * cols, (r + 1) * cols)),
  );
  assertEquals(Array.from(pair.dev.argmaxRows(a.dev)), want, "argmaxRows");
  assertEquals(want[1], 777, "the planted tie resolves to the first index");
  assertEquals(want[4], 0, "NaN never wins");
}

/**
 * Device argmax under token masks equals the comparison backend's (the CPU's where the
 * pair holds one) and the host's: a row unmasked, one allowing a single token, sparse and
 * dense masks, ties among allowed tokens; every masked row's largest value is forbidden,
 * so a mask not honoured shows. The vocabulary is not a multiple of 32.
 */
export function checkMaskedArgmax(pair: Pair): void {
  if (!hasArgmax(pair.dev) || !hasArgmax(pair.ref)) return;
  const [rows, cols] = [6, 151937];
  const words = Math.ceil(cols / 32);
  const data = randomF32(pair.rng, rows * cols);
  const allow = (bits: Uint32Array, i: number): void => {
    bits[i >>> 5] |= 1 << (i & 31);
  };
  const masks: (Uint32Array | null)[] = Array.from({ length: rows }, (_, r) => {
    if (r === 0) return null;
    const bits = new Uint32Array(words);
    if (r === 1) allow(bits, cols - 1);
    if (r === 2) { for (let i = 3; i < cols; i += 2900) allow(bits, i); }
    if (r === 3) { for (let i = 0; i < cols; i++) if (i % 97 !== 5) allow(bits, i); }
    if (r === 4) { for (let i = 0; i < cols; i++) if ((i >> 5) % 3 !== 1) allow(bits, i); }
    if (r === 5) {
      for (const i of [777, 150000, 40, 151936]) allow(bits, i);
      data[r * cols + 777] = 9;
      data[r * cols + 150000] = 9;
    }
    return bits;
  });
  for (let r = 1; r < rows; r++) {
    const forbidden = [5, 33].find((i) => (masks[r]![i >>> 5] & (1 << (i & 31))) === 0)!;
    data[r * cols + forbidden] = 50;
  }
  const a = pair.upload(data, rows, cols);
  const host = masks.map((m, r) => {
    const row = data.subarray(r * cols, (r + 1) * cols);
    return m === null ? argmax(row) : maskedArgmax(row, m);
  });
  assertEquals(Array.from(pair.dev.argmaxRows(a.dev, masks)), host, "masked argmaxRows");
  assertEquals(Array.from(pair.ref.argmaxRows(a.ref, masks)), host, "masked argmaxRows (ref)");
  assertEquals(host[1], cols - 1, "a single allowed token");
  assertEquals(host[5], 777, "the planted tie resolves to the first allowed index");
  const plain = Array.from(pair.dev.argmaxRows(a.dev));
  for (let r = 1; r < rows; r++) assertEquals(plain[r] === host[r], false, `row ${r} masked`);
  const none = masks.map(() => null);
  assertEquals(Array.from(pair.dev.argmaxRows(a.dev, none)), plain, "all masks null");
}
