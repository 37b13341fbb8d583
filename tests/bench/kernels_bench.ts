/**
 * Kernel benchmark (`deno task bench:kernels`): memory read bandwidth, mat-vec effective
 * GB/s per type on Qwen3-0.6B shapes, mat-mat tokens/s for prefill-sized batches, and the
 * decode tokens/s those rates predict for the Qwen3-0.6B Q8_0 and Q4_K_M tensor mixes.
 *
 * Mat-vec weights cycle through enough copies to exceed any cache, so each call streams
 * from memory as a real decode step does. The rows sweep times products of a few rows of
 * activations (batched decode, speculative verification) against the same matrix's pp512
 * rate: its per-row cost should approach the prefill path's. Flags: --types=Q8_0,Q4_K
 * (default: all), --threads=1,2, --rows=1,2,4,5,8,16,32 (the sweep's row counts),
 * --sweep-only (the rows sweep alone), --json (one object on stdout instead of tables).
 */

import { parseArgs } from "node:util";
import { buildCpuKernels } from "../../kernels/build_cpu.ts";
import { CpuKernels, type NativeBuffer, type Pool } from "../../src/backend/cpu/kernels.ts";
import {
  DEQUANTIZABLE_TYPES,
  ggmlTypeByName,
  type GgmlTypeInfo,
  randomBlocks,
  Rng,
} from "../../src/gguf/mod.ts";
import { QWEN3_SHAPES, qwen3TensorPlan } from "../../src/models/qwen3_synthetic.ts";
import { formatModelSteps, formatSweep, modelStepSweep, rowsSweep } from "./rows_sweep.ts";

const ALL_TYPES = DEQUANTIZABLE_TYPES.map((t) => t.name);
const MATMAT_TYPES = ["Q8_0", "Q4_K", "Q6_K", "F16"];
/** The types of Q8_0 and Q4_K_M files. */
const SWEEP_TYPES = ["Q8_0", "Q4_K", "Q5_K", "Q6_K"];
/** [rows, cols]: attention and FFN projections and the vocabulary output of Qwen3-0.6B. */
const SHAPES: Array<[number, number]> = [
  [1024, 1024],
  [2048, 1024],
  [1024, 2048],
  [3072, 1024],
  [1024, 3072],
  [151936, 1024],
];
const PREFILL = [128, 512];
const STREAM_BYTES = 768 * 1024 * 1024;
const UNIT_BYTES = 16 * 1024 * 1024;

const args = parseArgs({
  args: Deno.args,
  options: {
    types: { type: "string" },
    threads: { type: "string", default: "1,2" },
    rows: { type: "string", default: "1,2,4,5,8,16,32" },
    "sweep-only": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  },
});
const types = (args.values.types?.split(",") ?? ALL_TYPES).map((n) => {
  const t = ggmlTypeByName(n.toUpperCase());
  if (!t) throw new Error(`unknown type ${n}`);
  return t;
});
const threadCounts = args.values.threads.split(",").map(Number);
const log = (s: string) => console.log(s);

await buildCpuKernels();
const k = new CpuKernels();
const rng = new Rng(42);

/** A native buffer of `bytes` filled by repeating random valid blocks of `type`. */
function weights(type: GgmlTypeInfo, bytes: number): NativeBuffer {
  const unitBlocks = Math.max(1, Math.floor(Math.min(bytes, UNIT_BYTES) / type.typeSize));
  const unit = randomBlocks(type, unitBlocks, rng, 0.02);
  // On huge pages, as the copied weights (mmap = false) are: the kernels' own speed, without
  // the page walks of weights read in place.
  const buf = k.allocHuge(bytes);
  const view = buf.u8();
  for (let off = 0; off < bytes; off += unit.byteLength) {
    view.set(unit.subarray(0, Math.min(unit.byteLength, bytes - off)), off);
  }
  return buf;
}

function randomActivations(n: number): NativeBuffer {
  const buf = k.alloc(n * 4);
  const f = buf.f32();
  for (let i = 0; i < n; i++) f[i] = rng.normal();
  return buf;
}

/** Effective GB/s of weight bytes streamed by one-token matmuls. */
function matvecGbs(pool: Pool, type: GgmlTypeInfo, rows: number, cols: number): number {
  const bytes = k.rowBytes(type.id, cols) * rows;
  const copies = Math.max(2, Math.ceil(STREAM_BYTES / bytes));
  const w = weights(type, bytes * copies);
  const x = randomActivations(cols), y = k.alloc(rows * 4);
  const at = (i: number) => Deno.UnsafePointer.offset(w.pointer, (i % copies) * bytes)!;
  try {
    for (let i = 0; i < copies; i++) pool.matmul(type.id, at(i), rows, cols, x, 1, y);
    // Best of three rounds: other processes on a shared machine only ever slow a round.
    let best = 0;
    for (let round = 0; round < 3; round++) {
      let calls = 0;
      const start = performance.now();
      while (calls < copies || performance.now() - start < 150) {
        pool.matmul(type.id, at(calls), rows, cols, x, 1, y);
        calls++;
      }
      best = Math.max(best, (calls * bytes) / ((performance.now() - start) / 1000) / 1e9);
    }
    return best;
  } finally {
    w.free();
    x.free();
    y.free();
  }
}

/** Tokens/s of one n-token matmul. */
function matmatTokS(pool: Pool, type: GgmlTypeInfo, rows: number, cols: number, n: number): number {
  const w = weights(type, k.rowBytes(type.id, cols) * rows);
  const x = randomActivations(n * cols), y = k.alloc(n * rows * 4);
  try {
    pool.matmul(type.id, w, rows, cols, x, n, y);
    let calls = 0;
    const start = performance.now();
    while (calls < 1 || performance.now() - start < 300) {
      pool.matmul(type.id, w, rows, cols, x, n, y);
      calls++;
    }
    return (calls * n) / ((performance.now() - start) / 1000);
  } finally {
    w.free();
    x.free();
    y.free();
  }
}

const pad = (s: string | number, n: number) => String(s).padStart(n);
const maxThreads = Math.max(...threadCounts);

/** The matrices of a Qwen3-0.6B file, as a forward pass multiplies them. */
function modelPlan(quant: "q8_0" | "q4_k_m") {
  const hp = QWEN3_SHAPES["qwen3-0.6b"];
  return qwen3TensorPlan(hp, quant)
    .filter((t) => t.ne.length === 2 && (t.name !== "token_embd.weight" || hp.tiedOutput))
    .map((t) => ({ type: t.type, rows: t.ne[1], cols: t.ne[0] }));
}

const sweepPool = k.createPool(maxThreads);
const sweepInput = {
  k,
  pool: sweepPool,
  types: types.filter((t) => SWEEP_TYPES.includes(t.name)),
  rowCounts: args.values.rows.split(",").map(Number),
  weights,
  activations: randomActivations,
};
const sweep = rowsSweep(sweepInput);
const steps = {
  q8_0: modelStepSweep(sweepInput, modelPlan("q8_0")),
  q8_0_repacked: modelStepSweep(sweepInput, modelPlan("q8_0"), true),
  q4_k_m: modelStepSweep(sweepInput, modelPlan("q4_k_m")),
  q4_k_m_repacked: modelStepSweep(sweepInput, modelPlan("q4_k_m"), true),
};
sweepPool.destroy();
const sweepLines = (): string[] => [
  ...formatSweep(sweep, maxThreads),
  ...formatModelSteps("Q8_0", steps.q8_0, maxThreads),
  ...formatModelSteps("Q8_0 repacked", steps.q8_0_repacked, maxThreads),
  ...formatModelSteps("Q4_K_M", steps.q4_k_m, maxThreads),
  ...formatModelSteps("Q4_K_M repacked", steps.q4_k_m_repacked, maxThreads),
];
if (args.values["sweep-only"]) {
  if (args.values.json) {
    console.log(JSON.stringify({ rows_sweep: sweep, step_products: steps }));
  } else {
    for (const line of sweepLines()) log(line);
  }
  Deno.exit(0);
}

/** Best of several passes, before and after the run: a busy neighbour only lowers it. */
function measureBandwidth(): Record<number, number> {
  const out: Record<number, number> = {};
  for (const t of threadCounts) {
    const pool = k.createPool(t);
    out[t] = pool.bandwidth(1024 * 1024 * 1024, 8);
    pool.destroy();
  }
  return out;
}

const bandwidthBefore = measureBandwidth();

const matvec: Record<string, Record<number, number>> = {};
for (const type of types) {
  for (const [rows, cols] of SHAPES) {
    const key = `${type.name} ${rows}x${cols}`;
    matvec[key] = {};
    for (const t of threadCounts) {
      const pool = k.createPool(t);
      matvec[key][t] = matvecGbs(pool, type, rows, cols);
      pool.destroy();
    }
  }
}

const matmat: Record<string, Record<number, number>> = {};
for (const name of MATMAT_TYPES) {
  const type = ggmlTypeByName(name)!;
  if (!types.includes(type)) continue;
  for (const [rows, cols] of SHAPES) {
    const key = `${name} ${rows}x${cols}`;
    matmat[key] = {};
    const pool = k.createPool(maxThreads);
    for (const n of PREFILL) matmat[key][n] = matmatTokS(pool, type, rows, cols, n);
    pool.destroy();
  }
}

const bandwidthAfter = measureBandwidth();
const bandwidth: Record<number, number> = {};
for (const t of threadCounts) bandwidth[t] = Math.max(bandwidthBefore[t], bandwidthAfter[t]);

/** Decode tok/s predicted for a Qwen3-0.6B mix from the per-matrix mat-vec rates. */
function decodeEstimate(quant: "q8_0" | "q4_k_m", threads: number) {
  const hp = QWEN3_SHAPES["qwen3-0.6b"];
  let seconds = 0, bytes = 0;
  for (const t of qwen3TensorPlan(hp, quant)) {
    // A tied token_embd is read whole as the output projection; otherwise the embedding
    // lookup reads one row of it.
    if (t.ne.length !== 2 || (t.name === "token_embd.weight" && !hp.tiedOutput)) continue;
    const [cols, rows] = t.ne;
    const rate = matvec[`${t.type.name} ${rows}x${cols}`]?.[threads];
    if (rate === undefined) return undefined;
    const b = k.rowBytes(t.type.id, cols) * rows;
    bytes += b;
    seconds += b / (rate * 1e9);
  }
  return {
    tok_s: 1 / seconds,
    bytes_per_token: bytes,
    efficiency: bytes / seconds / 1e9 / bandwidth[threads],
  };
}

const estimates: Record<string, ReturnType<typeof decodeEstimate>> = {};
for (const quant of ["q8_0", "q4_k_m"] as const) {
  for (const t of threadCounts) estimates[`${quant} ${t}T`] = decodeEstimate(quant, t);
}

if (args.values.json) {
  console.log(JSON.stringify({
    bandwidth_gbs: bandwidth,
    matvec_gbs: matvec,
    matmat_tok_s: matmat,
    decode_estimate: estimates,
    rows_sweep: sweep,
    step_products: steps,
  }));
} else {
  for (const t of threadCounts) {
    log(
      `memory read bandwidth, ${t} thread(s): ${bandwidth[t].toFixed(1)} GB/s ` +
        `(before ${bandwidthBefore[t].toFixed(1)}, after ${bandwidthAfter[t].toFixed(1)})`,
    );
  }
  log(`isa: ${k.bestIsa()}  features: ${k.features().join(" ")}`);
  log(`\nmat-vec (1 token), effective GB/s of weights; % of that thread count's bandwidth`);
  log(
    `${"type".padEnd(6)} ${"shape".padEnd(12)} ${
      threadCounts.map((t) => pad(`${t}T GB/s`, 10) + pad("%", 5)).join(" ")
    }`,
  );
  for (const [key, byThreads] of Object.entries(matvec)) {
    const [name, shape] = key.split(" ");
    const cells = threadCounts.map((t) =>
      pad(byThreads[t].toFixed(1), 10) + pad(((100 * byThreads[t]) / bandwidth[t]).toFixed(0), 5)
    );
    log(`${name.padEnd(6)} ${shape.padEnd(12)} ${cells.join(" ")}`);
  }
  log(`\nmat-mat, ${maxThreads} thread(s): tokens/s (GMAC/s)`);
  for (const [key, byN] of Object.entries(matmat)) {
    const [name, shape] = key.split(" ");
    const [rows, cols] = shape.split("x").map(Number);
    const cells = PREFILL.map((n) =>
      `pp${n} ${pad(byN[n].toFixed(0), 7)} (${pad(((byN[n] * rows * cols) / 1e9).toFixed(0), 4)})`
    );
    log(`${name.padEnd(6)} ${shape.padEnd(12)} ${cells.join("  ")}`);
  }
  log(`\nQwen3-0.6B decode estimate from the mat-vec rates (matrices only)`);
  for (const [key, e] of Object.entries(estimates)) {
    if (!e) continue;
    log(
      `${key.padEnd(10)}: ${e.tok_s.toFixed(1)} tok/s, ${(e.bytes_per_token / 1e6).toFixed(0)} ` +
        `MB/token, ${(100 * e.efficiency).toFixed(0)}% of bandwidth`,
    );
  }
  for (const line of sweepLines()) log(line);
}
