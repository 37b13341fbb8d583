/**
 * The cuBLAS prefill path on the emulated GPU: activations beyond f16's range (65,504; Qwen's
 * FFN-down inputs reach it) give the CPU backend's product rather than infinities, and a
 * quantized weight is expanded to f16 once and reused by later prefill steps (chunks of one
 * prompt), with the same result as expanding it every step.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { buildCpuKernels } from "../../kernels/build_cpu.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import type { Backend, Weight } from "../../src/backend/backend.ts";
import { ReferenceBackend } from "../../src/backend/reference/reference_backend.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import { GEMM_MIN_TOKENS } from "../../src/backend/cuda/matmul_plan.ts";
import { dequantizeRow } from "../../src/gguf/dequant/mod.ts";
import { f16ToF32, f32ToF16 } from "../../src/gguf/half.ts";
import { GgmlType, ggmlTypeInfo } from "../../src/gguf/types.ts";
import { randomBlocks } from "../../src/gguf/quant/random.ts";
import { Rng } from "../../src/gguf/rng.ts";
import { randomF32, relError, source, typeNamed } from "../gpu/checks/pair.ts";

const emu = await emulator();
if (emu) await buildCpuKernels();

const ROWS = 37;
const COLS = 256;
const TOKENS = GEMM_MIN_TOKENS + 4;
/** Per output row, max error over that row's RMS: summation order only. */
const BOUND = 1e-4;

function withBackend<T>(options: { expansionBytes?: number }, fn: (be: CudaBackend) => T): T {
  resetEmulator(emu!);
  const be = emu!.backend(options);
  try {
    return fn(be);
  } finally {
    be.close();
  }
}

/** Activations whose rows 0, 5 and 11 pass f16's range (up to 2e6, as an FFN-down input can). */
function largeActivations(rng: Rng): Float32Array {
  const x = randomF32(rng, TOKENS * COLS);
  for (const [row, peak] of [[0, 7e4], [5, 2e6], [11, 65520]]) {
    for (let c = 0; c < COLS; c++) x[row * COLS + c] *= peak / 4;
    x[row * COLS + 7] = peak;
  }
  return x;
}

/** x rounded as the device rounds it: through f16 after the row's power-of-two scale. */
function asDevice(x: Float32Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < TOKENS; r++) {
    const row = x.subarray(r * COLS, (r + 1) * COLS);
    const amax = row.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    const k = amax >= 32768 ? Math.floor(Math.log2(amax)) + 1 - 15 : 0;
    for (let c = 0; c < COLS; c++) out[r * COLS + c] = f16ToF32(f32ToF16(row[c] / 2 ** k)) * 2 ** k;
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
function product(be: Backend, weight: Weight, x: Float32Array): Float32Array {
  const f32 = ggmlTypeInfo(GgmlType.F32)!;
  const table = be.loadWeight(source("x", f32, TOKENS, COLS, new Uint8Array(x.slice().buffer)));
  const a = be.activation(TOKENS, COLS);
  be.embed(a, table, Int32Array.from({ length: TOKENS }, (_, i) => i));
  const out = be.activation(TOKENS, ROWS);
  be.matmul(out, weight, a);
  return be.read(out);
}

Deno.test({
  name: "emulated cuBLAS prefill: activations past f16's range give the CPU backend's product",
  ignore: emu === null,
  fn() {
    const rng = new Rng(24);
    const type = typeNamed("Q8_0");
    const w = randomBlocks(type, (ROWS * COLS) / type.blockSize, rng, 0.05);
    const x = largeActivations(rng);
    const quantized = source("w", type, ROWS, COLS, w);
    const values = new Float32Array(ROWS * COLS);
    dequantizeRow(type, w, values);
    const halves = Float32Array.from(values, (v) => f16ToF32(f32ToF16(v)));
    const f32 = ggmlTypeInfo(GgmlType.F32)!;
    const ref = new ReferenceBackend();
    // The reference on exactly the device's operands: f16 weights, scaled f16 activations.
    const exact = product(
      ref,
      ref.loadWeight(source("w16", f32, ROWS, COLS, new Uint8Array(halves.buffer))),
      asDevice(x),
    );
    const cpu = new CpuBackend({ threads: 1 });
    try {
      const onCpu = product(cpu, cpu.loadWeight(quantized), x);
      withBackend({}, (cuda) => {
        const got = product(cuda, cuda.loadWeight(quantized), x);
        checkRows("against the reference on the device's operands", got, exact, BOUND);
        // The CPU rounds activations through q8 (1/254 of a block's largest value), far
        // coarser than f16: a few percent of a row's RMS apart, where infinities were.
        checkRows("against the CPU backend", got, onCpu, 5e-2);
      });
    } finally {
      cpu.close();
    }
  },
});

Deno.test({
  name: "emulated cuBLAS prefill: a weight is expanded to f16 once and reused by later steps",
  ignore: emu === null,
  fn() {
    const rng = new Rng(8);
    const type = typeNamed("Q4_K");
    const cols = 512;
    const w = randomBlocks(type, (ROWS * cols) / type.blockSize, rng, 0.05);
    const steps = [0, 1, 2].map(() => randomF32(rng, TOKENS * cols));
    const run = (expansionBytes: number) =>
      withBackend({ expansionBytes }, (cuda) => {
        const weight = cuda.loadWeight(source("w", type, ROWS, cols, w));
        const f32 = ggmlTypeInfo(GgmlType.F32)!;
        const outs: Float32Array[] = [];
        const expansions: number[] = [];
        for (const x of steps) {
          const table = cuda.loadWeight(
            source("x", f32, TOKENS, cols, new Uint8Array(x.slice().buffer)),
          );
          const a = cuda.activation(TOKENS, cols);
          cuda.embed(a, table, Int32Array.from({ length: TOKENS }, (_, i) => i));
          const out = cuda.activation(TOKENS, ROWS);
          cuda.synchronize();
          const before = emu!.control.stat("launches");
          cuda.matmul(out, weight, a);
          outs.push(cuda.read(out));
          // Each step launches: the f16 activations, any expansion, the unscale pass.
          expansions.push(emu!.control.stat("launches") - before - 2);
          cuda.free(a);
          cuda.free(out);
        }
        return { outs, expansions };
      });
    const kept = run(ROWS * cols * 2);
    const none = run(0);
    const tooSmall = run(ROWS * cols * 2 - 1);
    assertEquals(kept.expansions, [1, 0, 0]);
    assertEquals(none.expansions, [1, 1, 1]);
    assertEquals(tooSmall.expansions, [1, 1, 1]);
    for (let s = 0; s < steps.length; s++) {
      assertEquals(Array.from(kept.outs[s]), Array.from(none.outs[s]), `step ${s}`);
    }
  },
});
