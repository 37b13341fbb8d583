/**
 * The cuBLAS prefill path (a backend with cuBLAS loaded): activations beyond f16's range
 * (65,504; Qwen's FFN-down inputs reach it) give the CPU backend's product rather than
 * infinities, and a quantized weight is expanded to f16 once and reused by later prefill
 * steps (chunks of one prompt), with the same result as expanding it every step.
 */

import { assert, assertEquals } from "../../support/assert.ts";
import type { Backend, Weight } from "../../../src/backend/backend.ts";
import type { CudaBackend } from "../../../src/backend/cuda/mod.ts";
import { ReferenceBackend } from "../../../src/backend/reference/reference_backend.ts";
import { GEMM_MIN_TOKENS } from "../../../src/backend/cuda/matmul_plan.ts";
import { dequantizeRow } from "../../../src/gguf/dequant/mod.ts";
import { f16ToF32, f32ToF16 } from "../../../src/gguf/half.ts";
import { GgmlType, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { randomBlocks } from "../../../src/gguf/quant/random.ts";
import { Rng } from "../../../src/gguf/rng.ts";
import { randomF32, relError, source, typeNamed } from "./pair.ts";

const ROWS = 37;
const TOKENS = GEMM_MIN_TOKENS + 4;
/** Per output row, max error over that row's RMS: summation order only. */
const BOUND = 1e-4;

/** Activations whose rows 0, 5 and 11 pass f16's range (up to 2e6, as FFN-down inputs can). */
function largeActivations(rng: Rng, cols: number): Float32Array {
  const x = randomF32(rng, TOKENS * cols);
  for (const [row, peak] of [[0, 7e4], [5, 2e6], [11, 65520]]) {
    for (let c = 0; c < cols; c++) x[row * cols + c] *= peak / 4;
    x[row * cols + 7] = peak;
  }
  return x;
}

/** x rounded as the device rounds it: through f16 after its row's power-of-two scale. */
function asDevice(x: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < TOKENS; r++) {
    const row = x.subarray(r * cols, (r + 1) * cols);
    const amax = row.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    const k = amax >= 32768 ? Math.floor(Math.log2(amax)) + 1 - 15 : 0;
    for (let c = 0; c < cols; c++) out[r * cols + c] = f16ToF32(f32ToF16(row[c] / 2 ** k)) * 2 ** k;
  }
  return out;
}

function checkRows(what: string, got: Float32Array, want: Float32Array, bound: number): void {
  for (let t = 0; t < TOKENS; t++) {
    const g = got.subarray(t * ROWS, (t + 1) * ROWS);
    const err = relError(g, want.subarray(t * ROWS, (t + 1) * ROWS));
    assert(g.every(Number.isFinite), `${what}: token ${t} has non-finite outputs`);
    assert(err <= bound, `${what}: token ${t} off by ${err} of its RMS (bound ${bound})`);
  }
}

/** out = x · Wᵀ on `be` for host data. */
function product(be: Backend, weight: Weight, x: Float32Array, cols: number): Float32Array {
  const f32 = ggmlTypeInfo(GgmlType.F32)!;
  const table = be.loadWeight(source("x", f32, TOKENS, cols, new Uint8Array(x.slice().buffer)));
  const a = be.activation(TOKENS, cols);
  be.embed(a, table, Int32Array.from({ length: TOKENS }, (_, i) => i));
  const out = be.activation(TOKENS, ROWS);
  be.matmul(out, weight, a);
  const values = be.read(out);
  be.free(a);
  be.free(out);
  return values;
}

/**
 * Rows past f16's range on `cuda` against the reference on exactly the device's operands
 * (f16 weights, scaled f16 activations) and against `cpu` (the CPU backend, or the
 * reference where its library is not at hand), which computes on its own operands.
 */
export function checkF16Overflow(cuda: CudaBackend, cpu: Backend): void {
  const cols = 256;
  const rng = new Rng(24);
  const type = typeNamed("Q8_0");
  const w = randomBlocks(type, (ROWS * cols) / type.blockSize, rng, 0.05);
  const quantized = source("w", type, ROWS, cols, w);
  const x = largeActivations(rng, cols);
  const values = new Float32Array(ROWS * cols);
  dequantizeRow(type, w, values);
  const halves = Float32Array.from(values, (v) => f16ToF32(f32ToF16(v)));
  const f32 = ggmlTypeInfo(GgmlType.F32)!;
  const ref = new ReferenceBackend();
  const w16 = ref.loadWeight(source("w16", f32, ROWS, cols, new Uint8Array(halves.buffer)));
  const exact = product(ref, w16, asDevice(x, cols), cols);
  const got = product(cuda, cuda.loadWeight(quantized), x, cols);
  checkRows("against the reference on the device's operands", got, exact, BOUND);
  // The CPU rounds activations through q8 (1/254 of a block's largest value), far coarser
  // than f16: a few percent of a row's RMS apart, where infinities were.
  checkRows("against the CPU backend", got, product(cpu, cpu.loadWeight(quantized), x, cols), 5e-2);
}

/**
 * Three prefill steps with one Q4_K weight on backends made by `open` with room for its f16
 * copy, none, and one byte too little: how many expansion launches each step makes, and
 * every step's output equal whichever way the weight was expanded.
 */
export function checkExpansionReuse(open: (expansionBytes: number) => CudaBackend): void {
  const rng = new Rng(8);
  const type = typeNamed("Q4_K");
  const cols = 512;
  const w = randomBlocks(type, (ROWS * cols) / type.blockSize, rng, 0.05);
  const steps = [0, 1, 2].map(() => randomF32(rng, TOKENS * cols));
  const run = (expansionBytes: number) => {
    const be = open(expansionBytes);
    try {
      const weight = be.loadWeight(source("w", type, ROWS, cols, w));
      const outs: Float32Array[] = [];
      const expansions: number[] = [];
      for (const x of steps) {
        const f32 = ggmlTypeInfo(GgmlType.F32)!;
        const table = be.loadWeight(source("x", f32, TOKENS, cols, new Uint8Array(x.buffer)));
        const a = be.activation(TOKENS, cols);
        be.embed(a, table, Int32Array.from({ length: TOKENS }, (_, i) => i));
        const out = be.activation(TOKENS, ROWS);
        be.synchronize();
        const before = be.stats().launches;
        be.matmul(out, weight, a);
        outs.push(be.read(out));
        // Each step launches the f16 activations and the unscale pass, and any expansion.
        expansions.push(be.stats().launches - before - 2);
        be.free(a);
        be.free(out);
      }
      return { outs, expansions };
    } finally {
      be.close();
    }
  };
  const kept = run(ROWS * cols * 2);
  const none = run(0);
  const tooSmall = run(ROWS * cols * 2 - 1);
  assertEquals(kept.expansions, [1, 0, 0]);
  assertEquals(none.expansions, [1, 1, 1]);
  assertEquals(tooSmall.expansions, [1, 1, 1]);
  for (let s = 0; s < steps.length; s++) {
    assertEquals(Array.from(kept.outs[s]), Array.from(none.outs[s]), `step ${s}`);
  }
}
