/**
 * The rows sweep of the kernel benchmark: products of a few rows of activations (batched
 * decode, speculative verification) against the same matrix at pp512. Both read every
 * weight once per call, so a product of n rows can run near n times pp512's per-row cost;
 * the sweep reports how near, and what n rows cost against one (a k = 4 verification is a
 * 5-row product).
 *
 * Weights cycle through enough copies to exceed any cache, so each call streams them from
 * memory as a model step does.
 */

import { cpuUsage } from "node:process";
import type { CpuKernels, NativeBuffer, Pool } from "../../src/backend/cpu/kernels.ts";
import type { GgmlTypeInfo } from "../../src/gguf/mod.ts";
import { REPACK_ROWS } from "../../src/backend/cpu/kernel_types.ts";

/** [rows, cols]: Qwen3-0.6B's FFN up/gate and down projections. */
export const SWEEP_SHAPES: Array<[number, number]> = [[3072, 1024], [1024, 3072]];
const PREFILL_ROWS = 512;
const STREAM_BYTES = 512 * 1024 * 1024;
const SWEEP_MACS = 2e10;
const ROUNDS = 5;

export interface SweepPoint {
  /** Rows of activations. */
  n: number;
  /** CPU microseconds per call. */
  us: number;
  /** pp512's microseconds per row over this product's: 1 = the prefill path's rate. */
  of_prefill: number;
  /** This call's time over a 1-row call's. */
  of_one: number;
}

export interface SweepResult {
  type: string;
  shape: string;
  pp512_us_per_row: number;
  points: SweepPoint[];
}

export interface SweepInput {
  k: CpuKernels;
  pool: Pool;
  types: GgmlTypeInfo[];
  rowCounts: number[];
  /** Copies of `bytes` bytes of valid `type` blocks, on huge pages. */
  weights: (type: GgmlTypeInfo, bytes: number) => NativeBuffer;
  activations: (n: number) => NativeBuffer;
}

/** CPU microseconds (all threads of the process) per n-row product over the cycled copies.
 * CPU time, not wall time: on a machine shared with other work a preempted call's wall
 * time says nothing of its kernel, and a busy neighbour only adds to it by slowing memory. */
function cpuMicrosPerCall(
  input: SweepInput,
  type: number,
  w: NativeBuffer,
  copies: number,
  rows: number,
  cols: number,
  n: number,
): number {
  const { k, pool } = input;
  const bytes = k.rowBytes(type, cols) * rows;
  const x = input.activations(n * cols), y = k.alloc(n * rows * 4);
  const at = (i: number) => Deno.UnsafePointer.offset(w.pointer, (i % copies) * bytes)!;
  try {
    pool.matmul(type, at(0), rows, cols, x, n, y);
    // A fixed amount of work per point: rounds of enough calls to cover the copies and
    // about SWEEP_MACS / ROUNDS multiply-adds. The cheapest round: time lost to a neighbour
    // (its cache traffic evicting ours) only adds.
    const calls = Math.max(copies, Math.ceil(SWEEP_MACS / ROUNDS / (n * rows * cols)));
    let best = Infinity;
    for (let round = 0; round < ROUNDS; round++) {
      const before = cpuUsage();
      for (let i = 1; i <= calls; i++) pool.matmul(type, at(i), rows, cols, x, n, y);
      const used = cpuUsage(before);
      best = Math.min(best, (used.user + used.system) / calls);
    }
    return best;
  } finally {
    x.free();
    y.free();
  }
}

/** Copies of a matrix repacked (repacked.ts) as the CPU backend repacks at load, or null
 * when the kernels do not repack its type. */
function repackedCopies(
  input: SweepInput,
  type: GgmlTypeInfo,
  w: NativeBuffer,
  copies: number,
  rows: number,
  cols: number,
): { type: number; w: NativeBuffer } | null {
  const { k, pool } = input;
  const to = k.repackedType(type.id);
  if (to === null) return null;
  const from = k.rowBytes(type.id, cols) * rows, bytes = k.rowBytes(to, cols) * rows;
  const packed = k.allocHuge(bytes * copies);
  for (let i = 0; i < copies; i++) {
    pool.repack(
      type.id,
      Deno.UnsafePointer.offset(w.pointer, i * from)!,
      rows,
      cols,
      Deno.UnsafePointer.offset(packed.pointer, i * bytes)!,
    );
  }
  return { type: to, w: packed };
}

export function rowsSweep(input: SweepInput): SweepResult[] {
  const out: SweepResult[] = [];
  for (const type of input.types) {
    for (const [rows, cols] of SWEEP_SHAPES) {
      const bytes = input.k.rowBytes(type.id, cols) * rows;
      const copies = Math.max(2, Math.ceil(STREAM_BYTES / bytes));
      const plain = input.weights(type, bytes * copies);
      const repacked = repackedCopies(input, type, plain, copies, rows, cols);
      const layouts: Array<{ name: string; id: number; w: NativeBuffer }> = [
        { name: type.name, id: type.id, w: plain },
      ];
      if (repacked) layouts.push({ name: `${type.name}r`, id: repacked.type, w: repacked.w });
      for (const { name, id, w } of layouts) {
        const time = (n: number) => cpuMicrosPerCall(input, id, w, copies, rows, cols, n);
        const perRow = time(PREFILL_ROWS) / PREFILL_ROWS;
        const one = time(1);
        out.push({
          type: name,
          shape: `${rows}x${cols}`,
          pp512_us_per_row: perRow,
          points: input.rowCounts.map((n) => {
            const us = n === 1 ? one : time(n);
            return { n, us, of_prefill: (perRow * n) / us, of_one: us / one };
          }),
        });
      }
      plain.free();
      repacked?.w.free();
    }
  }
  return out;
}

export function formatSweep(results: SweepResult[], threads: number): string[] {
  const pad = (s: string | number, n: number) => String(s).padStart(n);
  const lines = [
    `\nrows sweep, ${threads} thread(s): CPU µs per call; per-row rate as a fraction of pp512's; ` +
    `call time over 1 row's`,
  ];
  for (const r of results) {
    lines.push(
      `${r.type.padEnd(6)} ${r.shape.padEnd(10)} pp512 ${r.pp512_us_per_row.toFixed(2)} µs/row`,
    );
    for (const p of r.points) {
      lines.push(
        `  n=${pad(p.n, 3)} ${pad(p.us.toFixed(1), 9)} µs  ${
          pad(p.of_prefill.toFixed(2), 5)
        } of pp512` +
          `  ${pad(p.of_one.toFixed(2), 6)}x 1 row`,
      );
    }
  }
  return lines;
}

export interface ModelStepPoint {
  n: number;
  /** CPU milliseconds of the step's products (every matrix once, n rows). */
  cpu_ms: number;
  /** pp512's CPU time per row over this step's: 1 = the prefill path's rate. */
  of_prefill: number;
  of_one: number;
}

/**
 * The products of one Qwen3-0.6B step of n rows, every matrix of the model in turn as a
 * forward pass multiplies them (the model is larger than any cache, so each step streams
 * its weights): what a batch of n decode rows (or a k + 1 verification) costs in products
 * alone, against the same model's pp512 per row.
 */
export function modelStepSweep(
  input: SweepInput,
  plan: Array<{ type: GgmlTypeInfo; rows: number; cols: number }>,
  repack = false,
): ModelStepPoint[] {
  const { k, pool } = input;
  const mats = plan.map((p) => {
    const w = input.weights(p.type, k.rowBytes(p.type.id, p.cols) * p.rows);
    const to = repack && p.rows % REPACK_ROWS === 0 ? k.repackedType(p.type.id) : null;
    if (to === null) return { ...p, kernelType: p.type.id, w };
    // As the CPU backend loads it: repacked onto huge pages.
    const packed = k.allocHuge(k.rowBytes(to, p.cols) * p.rows);
    pool.repack(p.type.id, w, p.rows, p.cols, packed);
    w.free();
    return { ...p, kernelType: to, w: packed };
  });
  const maxCols = Math.max(...plan.map((p) => p.cols));
  const maxRows = Math.max(...plan.map((p) => p.rows));
  try {
    const step = (n: number): number => {
      const x = input.activations(n * maxCols), y = k.alloc(n * maxRows * 4);
      try {
        let best = Infinity;
        for (let round = 0; round < ROUNDS; round++) {
          const before = cpuUsage();
          for (const m of mats) pool.matmul(m.kernelType, m.w, m.rows, m.cols, x, n, y);
          const used = cpuUsage(before);
          best = Math.min(best, (used.user + used.system) / 1000);
        }
        return best;
      } finally {
        x.free();
        y.free();
      }
    };
    const perRow = step(PREFILL_ROWS) / PREFILL_ROWS;
    const one = step(1);
    return input.rowCounts.map((n) => {
      const ms = n === 1 ? one : step(n);
      return { n, cpu_ms: ms, of_prefill: (perRow * n) / ms, of_one: ms / one };
    });
  } finally {
    for (const m of mats) m.w.free();
  }
}

export function formatModelSteps(
  quant: string,
  points: ModelStepPoint[],
  threads: number,
): string[] {
  const pad = (s: string | number, n: number) => String(s).padStart(n);
  return [
    `\nQwen3-0.6B ${quant} step products, ${threads} thread(s): CPU ms per step of n rows`,
    ...points.map((p) =>
      `  n=${pad(p.n, 3)} ${pad(p.cpu_ms.toFixed(1), 8)} ms  ${pad(p.of_prefill.toFixed(2), 5)} ` +
      `of pp512  ${pad(p.of_one.toFixed(2), 6)}x 1 row`
    ),
  ];
}
