/**
 * The small ops against the reference: RMSNorm (per token and per head, narrow and wide),
 * NeoX RoPE at large positions, SiLU-gate, add, row gather, embedding lookups from
 * quantized tables, and greedy argmax on the device.
 */

import { argmax } from "../../../src/common/argmax.ts";
import { GgmlType, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { f32ToF16 } from "../../../src/gguf/half.ts";
import type { Activation, Backend, StepLayout } from "../../../src/backend/backend.ts";
import { assertEquals } from "../../support/assert.ts";
import { type Pair, randomF32, source, typeNamed } from "./pair.ts";

const EXACT = 1e-6;
const NORM = 1e-5;
/** RoPE angles are computed in f32 (as llama.cpp does): exact to ~2^-24 of the position. */
const ROPE_NEAR = 2e-4;
const ROPE_FAR = 1e-2;

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

export function checkRope(pair: Pair): void {
  const sets: Array<[number[], number]> = [[[0, 7, 1234, 2047, 3], ROPE_NEAR], [
    [40000, 40961, 9],
    ROPE_FAR,
  ]];
  for (const [heads, dim, base] of [[3, 64, 1e6], [2, 128, 10000], [5, 32, 1e6]] as const) {
    for (const [list, bound] of sets) {
      const positions = Int32Array.from(list);
      const rows = positions.length;
      const layout: StepLayout = { positions, sequences: [] };
      const x = pair.random(rows, heads * dim);
      pair.dev.ropeNeox(x.dev, layout, heads, dim, base);
      pair.ref.ropeNeox(x.ref, layout, heads, dim, base);
      pair.check(`ropeNeox ${heads} heads of ${dim}, base ${base}, positions ${list}`, x, bound);
    }
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
  argmaxRows(a: Activation): Int32Array;
}

function hasArgmax(b: Backend): b is Backend & Argmaxer {
  return typeof (b as Partial<Argmaxer>).argmaxRows === "function";
}

/** Device argmax equals the host's (first index on ties) on rows with planted ties. */
export function checkArgmax(pair: Pair): void {
  if (!hasArgmax(pair.dev)) return;
  const [rows, cols] = [4, 151936];
  const data = randomF32(pair.rng, rows * cols);
  data[cols + 777] = 9;
  data[cols + 150000] = 9;
  data[2 * cols + cols - 1] = 12;
  const a = pair.upload(data, rows, cols);
  const want = Array.from(
    { length: rows },
    (_, r) => argmax(data.subarray(r * cols, (r + 1) * cols)),
  );
  assertEquals(Array.from(pair.dev.argmaxRows(a.dev)), want, "argmaxRows");
  assertEquals(want[1], 777, "the planted tie resolves to the first index");
}
