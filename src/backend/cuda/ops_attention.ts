/**
 * Recording what depends on a step's layout: RoPE positions, KV stores and attention (full
 * or over a sliding window).
 * A layout goes to the arena once per step (positions; then, for cache ops, the row ->
 * sequence map and the block tables padded to a power-of-two stride), after checking
 * every position against its block table, since a bad index here would be a wild device
 * write.
 */

import type { AttentionShape, KvDType, StepLayout } from "../backend.ts";
import type { CudaContext, DeviceLayout } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import type { CudaActivation, CudaKvCache } from "./resources.ts";
import { noted } from "./fusion.ts";

const ATTN_THREADS = 128;
/** Rows of one sequence in a step from which attention takes the tiled prefill kernel. */
const PREFILL_MIN_ROWS = 16;
/** Query rows per block of the tiled kernel, and the largest head it takes. */
const PREFILL_ROWS = 16;
const PREFILL_MAX_DIM = 128;
/**
 * Fewest positions worth a split of their own: one tile of 32. Four tiles (128) left an
 * 8B model's decode at 512 positions 40 blocks walking their tiles in turn on an H200's 132
 * multiprocessors, 25 us a layer; the combine of more splits costs far less.
 */
const POSITIONS_PER_SPLIT = 32;
const MAX_SPLITS = 64;
/** Query heads one decode block serves (DEC_HEADS of attention.cu). */
const DECODE_HEADS = 8;

/** Block-table stride for tables of up to `longest` blocks: a power of two, at least 16. */
export function tableStride(longest: number): number {
  let s = 16;
  while (s < longest) s *= 2;
  return s;
}

/**
 * Splits per (row, block of query heads) for decode attention: enough blocks to fill the
 * GPU twice over, never below POSITIONS_PER_SPLIT positions each. `maxPositions` is the
 * block-table bucket's reach, so a graph captured for one decode step fits the next.
 */
export function attentionSplits(
  rows: number,
  headBlocks: number,
  maxPositions: number,
  multiprocessors: number,
): number {
  const ctas = rows * headBlocks;
  const wanted = Math.ceil((2 * multiprocessors) / ctas);
  const bySize = Math.ceil(maxPositions / POSITIONS_PER_SPLIT);
  return Math.max(1, Math.min(wanted, bySize, MAX_SPLITS));
}

function checkPositions(op: string, layout: StepLayout, rows: number): void {
  if (layout.positions.length < rows) {
    throw invalidArgument(op, `${rows} rows but ${layout.positions.length} positions`);
  }
}

/** Device address of the layout's positions (first `rows`). */
export function internPositions(ctx: CudaContext, layout: StepLayout, rows: number): number {
  checkPositions("rope", layout, rows);
  ctx.reserveArena(4 * rows + 64);
  const cur = ctx.layouts.get(layout);
  if (cur !== undefined && cur.rows === rows) return cur.positions;
  const positions = ctx.arena.put(layout.positions.subarray(0, rows));
  ctx.layouts.set(layout, { rows, positions, rowSeq: 0, tables: 0, stride: 0 });
  return positions;
}

/** Arena bytes a layout takes (positions, row -> sequence map, tables). */
function layoutBytes(layout: StepLayout, rows: number): number {
  return 4 * (2 * rows + Math.max(1, layout.sequences.length) * tableStrideFor(layout)) + 3 * 64;
}

/** The layout with its sequences on the device, checked against `cache` once per step. */
export function internSequences(
  ctx: CudaContext,
  op: string,
  layout: StepLayout,
  rows: number,
  cache: CudaKvCache,
): DeviceLayout {
  checkPositions(op, layout, rows);
  const stride = tableStrideFor(layout);
  const nSeq = layout.sequences.length;
  ctx.reserveArena(layoutBytes(layout, rows));
  const cur = ctx.layouts.get(layout);
  if (cur !== undefined && cur.rows === rows && cur.rowSeq !== 0) return cur;
  const rowSeq = rowSequences(op, layout, rows, cache);
  const positions = cur !== undefined && cur.rows === rows
    ? cur.positions
    : ctx.arena.put(layout.positions.subarray(0, rows));
  const tables = ctx.arena.fill(Math.max(1, nSeq) * stride, (view) => {
    view.fill(0);
    layout.sequences.forEach((seq, s) => view.set(seq.blockTable, s * stride));
  });
  const dl: DeviceLayout = { rows, positions, rowSeq: ctx.arena.put(rowSeq), tables, stride };
  ctx.layouts.set(layout, dl);
  return dl;
}

/** Each row's sequence (-1 for none), after checking every row's slot is in its table. */
function rowSequences(
  op: string,
  layout: StepLayout,
  rows: number,
  cache: CudaKvCache,
): Int32Array {
  const { nBlocks, blockSize } = cache.spec;
  const rowSeq = new Int32Array(rows).fill(-1);
  layout.sequences.forEach((seq, s) => {
    const { rowStart, rowCount, blockTable } = seq;
    if (rowStart < 0 || rowCount < 0 || rowStart + rowCount > rows) {
      throw invalidArgument(op, `sequence ${s} has rows ${rowStart}..+${rowCount} of ${rows}`);
    }
    for (const b of blockTable) {
      if (!(b >= 0 && b < nBlocks)) throw invalidArgument(op, `block ${b} is not in the pool`);
    }
    for (let r = rowStart; r < rowStart + rowCount; r++) {
      const p = layout.positions[r];
      if (!(p >= 0) || Math.floor(p / blockSize) >= blockTable.length) {
        throw invalidArgument(op, `position ${p} is beyond sequence ${s}'s block table`);
      }
      if (rowSeq[r] !== -1) throw invalidArgument(op, `row ${r} belongs to two sequences`);
      rowSeq[r] = s;
    }
  });
  return rowSeq;
}

function checkLayer(op: string, cache: CudaKvCache, layer: number): void {
  if (!Number.isInteger(layer) || layer < 0 || layer >= cache.spec.nLayers) {
    throw invalidArgument(op, `layer ${layer} of ${cache.spec.nLayers}`);
  }
}

/**
 * Tape words after which a step is sent to the GPU in parts: the GPU runs the first layers
 * (as their own CUDA graph) while the rest is recorded. The cut falls at a KV store, where
 * no fusion spans it, and depends on the op sequence alone, so every decode step of a shape
 * cuts at the same places and each part replays its own graph.
 */
export const SEGMENT_WORDS = 3000;

export function recordStoreKv(
  ctx: CudaContext,
  cache: CudaKvCache,
  layer: number,
  k: CudaActivation,
  v: CudaActivation,
  layout: StepLayout,
): void {
  checkLayer("storeKv", cache, layer);
  if (ctx.runner.tape.length >= SEGMENT_WORDS) ctx.flush();
  const kvDim = cache.spec.nKvHeads * cache.spec.headDim;
  if (k.cols !== kvDim || v.cols !== kvDim || v.rows !== k.rows) {
    throw invalidArgument(
      "storeKv",
      `K ${k.rows}x${k.cols} / V ${v.rows}x${v.cols}, cache rows ${kvDim}`,
    );
  }
  const dl = internSequences(ctx, "storeKv", layout, k.rows, cache);
  // One thread per value, or for a quantized cache one warp per 32-value block: the same
  // grid either way.
  ctx.runner.tape.launch(
    ctx.k(`kv_store_${cache.spec.dtype}`),
    Math.ceil(kvDim / 128),
    k.rows,
    1,
    128,
  )
    .p(cache.k[layer]).p(cache.v[layer]).p(k.ptr).p(v.ptr)
    .p(dl.positions).p(dl.rowSeq).p(dl.tables)
    .i(dl.stride).i(k.rows).i(kvDim).i(cache.spec.blockSize).end();
}

export function recordAttention(
  ctx: CudaContext,
  out: CudaActivation,
  q: CudaActivation,
  cache: CudaKvCache,
  layer: number,
  layout: StepLayout,
  shape: AttentionShape,
): void {
  checkLayer("attention", cache, layer);
  const { nHeads, nKvHeads, headDim, scale } = shape;
  const window = shape.window ?? 0;
  const spec = cache.spec;
  if (!(Number.isSafeInteger(window) && window >= 0 && window <= 0x7fffffff)) {
    throw invalidArgument("attention", `window ${window}`);
  }
  if (nKvHeads !== spec.nKvHeads || headDim !== spec.headDim || nHeads % nKvHeads !== 0) {
    throw invalidArgument(
      "attention",
      `${nHeads}/${nKvHeads} heads of ${headDim} on a cache of ${spec.nKvHeads} x ${spec.headDim}`,
    );
  }
  if (headDim % 32 !== 0 || headDim > 256) {
    throw invalidArgument(
      "attention",
      `head_dim ${headDim} (must be a multiple of 32, at most 256)`,
    );
  }
  if (q.cols !== nHeads * headDim || out.cols !== q.cols || out.rows < q.rows) {
    throw invalidArgument("attention", `q ${q.rows}x${q.cols}, out ${out.rows}x${out.cols}`);
  }
  const rows = q.rows;
  // Sequences with many rows in this step (prefill) take the tiled kernel.
  const tiled = headDim <= PREFILL_MAX_DIM
    ? layout.sequences.filter((seq) => seq.rowCount >= PREFILL_MIN_ROWS)
    : [];
  const splitRows = layout.sequences.reduce((n, seq) => n + seq.rowCount, 0) -
    tiled.reduce((n, seq) => n + seq.rowCount, 0);
  // A decode block serves up to DECODE_HEADS query heads of one KV head's group.
  const headBlocks = nKvHeads * Math.ceil(nHeads / nKvHeads / DECODE_HEADS);
  // A window bounds what any row sees: no more splits than its positions fill.
  const reach = tableStrideFor(layout) * spec.blockSize;
  const splits = attentionSplits(
    rows,
    headBlocks,
    window > 0 ? Math.min(window, reach) : reach,
    ctx.device.multiprocessors,
  );
  const parts = rows * nHeads * splits;
  const acc = splitRows > 0 ? ctx.scratch("attn_acc", parts * headDim * 4) : 0;
  const ml = splitRows > 0 ? ctx.scratch("attn_ml", parts * 2 * 4) : 0;
  // Before the arena is reserved: growing a scratch buffer flushes what was recorded.
  const queries = quantizedQueries(ctx, q, spec.dtype);
  ctx.reserveArena(layoutBytes(layout, rows) + 4 * rows + 64);
  const dl = internSequences(ctx, "attention", layout, rows, cache);
  const tape = ctx.runner.tape;
  for (const seq of tiled) {
    const s = layout.sequences.indexOf(seq);
    tape.launch(
      ctx.k(`attn_prefill_${spec.dtype}`),
      nHeads,
      Math.ceil(seq.rowCount / PREFILL_ROWS),
      1,
      ATTN_THREADS,
    )
      .p(out.ptr).p(queries).p(cache.k[layer]).p(cache.v[layer])
      .p(dl.positions).p(dl.tables + 4 * s * dl.stride)
      .i(seq.rowStart).i(seq.rowCount).i(nHeads).i(nKvHeads).i(headDim).i(spec.blockSize).f(scale)
      .i(window).end();
  }
  if (splitRows === 0) return;
  // The split kernels skip rows marked -1: those of no sequence, and the tiled ones.
  const rowSeq = tiled.length === 0 ? dl.rowSeq : ctx.arena.fill(rows, (view) => {
    view.fill(-1);
    layout.sequences.forEach((seq, s) => {
      if (!tiled.includes(seq)) view.fill(s, seq.rowStart, seq.rowStart + seq.rowCount);
    });
  });
  tape.launch(ctx.k(`attn_split_${spec.dtype}`), headBlocks, rows, splits, ATTN_THREADS)
    .p(acc).p(ml).p(queries).p(cache.k[layer]).p(cache.v[layer])
    .p(dl.positions).p(rowSeq).p(dl.tables)
    .i(dl.stride).i(nHeads).i(nKvHeads).i(headDim).i(spec.blockSize).i(splits).f(scale)
    .i(window).end();
  const body = { kind: "combine" as const, out, acc, ml, rowSeq, heads: nHeads, headDim, splits };
  noted(ctx, body, () => {
    tape.launch(ctx.k("attn_combine"), nHeads, rows, 1, ATTN_THREADS)
      .p(out.ptr).p(acc).p(ml).p(rowSeq).i(nHeads).i(headDim).i(splits).end();
  });
}

/**
 * The queries as the attention kernels read them: against a quantized K, rounded through
 * q8_0 blocks first (llama.cpp takes Q.K as a q8_0 dot product; so does the CPU backend).
 */
function quantizedQueries(ctx: CudaContext, q: CudaActivation, dtype: KvDType): number {
  if (dtype !== "q8_0" && dtype !== "q4_0") return q.ptr;
  const n = q.rows * q.cols;
  const rounded = ctx.scratch("attn_q8", 4 * n);
  ctx.runner.tape.launch(ctx.k("q8_0_round"), Math.ceil(n / 128), 1, 1, 128)
    .p(rounded).p(q.ptr).i(n).end();
  return rounded;
}

function tableStrideFor(layout: StepLayout): number {
  let longest = 1;
  for (const s of layout.sequences) longest = Math.max(longest, s.blockTable.length);
  return tableStride(longest);
}
