/**
 * Checker for the paged KV cache: kv_store puts each token's K/V in the slot its position
 * maps to through a shuffled block table; attention over it matches a float64 causal GQA
 * softmax, for f32, f16, q8_0 and q4_0 caches (the quantized ones byte for byte what ggml's
 * reference quantizers write), prefill and decode chunks whose positions do not start
 * at 0, several blocks and more positions than one tile, every level, 1 and 2 threads.
 * Attention takes a kernel item per run of a chunk's tokens (64 query rows' worth), so
 * chunks also end in uneven runs, cross blocks and 64-position tiles mid-run, come out of
 * order, and groups are wider than one run. Sliding windows (Gemma 3's local layers) start
 * each row's positions mid-tile and mid-block, for windows narrower and wider than a tile.
 */

import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { f16ToF32, f32ToF16, Rng } from "../../gguf/mod.ts";
import { CpuKernelError } from "./errors.ts";
import {
  KV_F16,
  KV_F32,
  KV_Q4_0,
  KV_Q8_0,
  type KvLayout,
  kvLayoutBytes,
  type KvType,
} from "./kernels.ts";
import { dequantizeRow, type KvQuant, quantizeRow, roundThroughQ8 } from "../reference/kv_quant.ts";
import type { KvSequence } from "./kv_layout.ts";
import { type Setup, SETUPS } from "./attention_test_setups.ts";
import { maxAbsDiff, randomF32, testKernels } from "../../../tests/support/cpu_kernels.ts";
import { range } from "../../../tests/support/range.ts";

/** The whole call as one sequence. */
function one(blockTable: Int32Array, rowCount: number): KvSequence[] {
  return [{ rowStart: 0, rowCount, blockTable }];
}

const KV_TYPES: [KvType, string][] = [
  [KV_F32, "f32"],
  [KV_F16, "f16"],
  [KV_Q8_0, "q8_0"],
  [KV_Q4_0, "q4_0"],
];

/** The quantization of a cache type, if it has one. */
function quant(type: KvType): KvQuant | undefined {
  return type === KV_Q8_0 ? "q8_0" : type === KV_Q4_0 ? "q4_0" : undefined;
}

/** What the cache holds for values written as f32 (whole rows of blocks when quantized). */
function stored(type: KvType, v: Float32Array): Float32Array {
  const q = quant(type);
  if (q !== undefined) return dequantizeRow(q, quantizeRow(q, v));
  return type === KV_F16 ? v.map((x) => f16ToF32(f32ToF16(x))) : v;
}

Deno.test("kv_store + attention match a float64 causal GQA reference over a paged cache", async () => {
  const k = await testKernels();
  const rng = new Rng(21);
  for (const s of SETUPS) {
    const lastPos = Math.max(...s.chunks.flat());
    const usedBlocks = Math.floor(lastPos / s.blockSize) + 1;
    const nBlocks = usedBlocks + 3;
    // A shuffled table: logical block i lives in cache block table[i].
    const table = Int32Array.from(
      [...Array(nBlocks).keys()].sort(() => rng.float() - 0.5).slice(0, usedBlocks),
    );
    const kvWidth = s.nKvHeads * s.headDim;
    const keys = randomF32(rng, (lastPos + 1) * kvWidth);
    const vals = randomF32(rng, (lastPos + 1) * kvWidth);
    const scale = 1 / Math.sqrt(s.headDim);
    const queries = s.chunks.map((c) => randomF32(rng, c.length * s.nHeads * s.headDim));
    for (const [type, typeName] of KV_TYPES) {
      const keysHeld = stored(type, keys), valsHeld = stored(type, vals);
      const layout: KvLayout = {
        type,
        nBlocks,
        blockSize: s.blockSize,
        nKvHeads: s.nKvHeads,
        headDim: s.headDim,
      };
      // Against a quantized K the queries take part as q8_0 blocks, as in llama.cpp.
      const wants = s.chunks.map((c, i) =>
        attentionRef(
          s,
          quant(type) ? roundThroughQ8(queries[i]) : queries[i],
          keysHeld,
          valsHeld,
          c,
          scale,
        )
      );
      for (const threads of [1, 2]) {
        const pool = k.createPool(threads);
        for (const isa of k.supportedIsas()) {
          pool.isa = isa;
          const what = `${s.nHeads}/${s.nKvHeads}x${s.headDim} window ${
            s.window ?? 0
          } ${typeName} ${isa} threads=${threads}`;
          const bytes = kvLayoutBytes(layout);
          const kc = k.alloc(bytes), vc = k.alloc(bytes);
          s.chunks.forEach((chunk, c) => {
            const pos = Int32Array.from(chunk);
            const n = pos.length;
            const kIn = new Float32Array(n * kvWidth), vIn = new Float32Array(n * kvWidth);
            chunk.forEach((p, t) => {
              kIn.set(keys.subarray(p * kvWidth, (p + 1) * kvWidth), t * kvWidth);
              vIn.set(vals.subarray(p * kvWidth, (p + 1) * kvWidth), t * kvWidth);
            });
            pool.kvStore(layout, kc, vc, one(table, n), pos, kIn, vIn);
            const out = new Float32Array(queries[c].length).fill(NaN);
            pool.attention(
              layout,
              out,
              queries[c],
              kc,
              vc,
              one(table, n),
              pos,
              s.nHeads,
              scale,
              s.window,
            );
            const err = maxAbsDiff(out, wants[c]);
            assert(err < (type === KV_F32 ? 1e-5 : 2e-5), `${what} chunk at ${chunk[0]}: ${err}`);
          });
          checkSlots(s, type, table, kc, keys, lastPos, what);
          kc.free();
          vc.free();
        }
        pool.destroy();
      }
    }
  }
});

/** The attention of `q` over the cache's values of keys and vals, in float64. */
function attentionRef(
  s: Setup,
  q: Float32Array,
  keys: Float32Array,
  vals: Float32Array,
  chunk: number[],
  scale: number,
): Float64Array {
  const d = s.headDim, group = s.nHeads / s.nKvHeads, kvWidth = s.nKvHeads * d;
  const out = new Float64Array(q.length);
  chunk.forEach((p, t) => {
    for (let h = 0; h < s.nHeads; h++) {
      const kvh = Math.floor(h / group);
      const qo = (t * s.nHeads + h) * d;
      const first = s.window === undefined ? 0 : Math.max(0, p - s.window + 1);
      const scores = [];
      for (let j = first; j <= p; j++) {
        let dot = 0;
        for (let i = 0; i < d; i++) {
          dot += q[qo + i] * keys[j * kvWidth + kvh * d + i];
        }
        scores.push(dot * scale);
      }
      const max = Math.max(...scores);
      const w = scores.map((x) => Math.exp(x - max));
      const sum = w.reduce((a, b) => a + b, 0);
      for (let j = first; j <= p; j++) {
        for (let i = 0; i < d; i++) {
          out[qo + i] += (w[j - first] / sum) * vals[j * kvWidth + kvh * d + i];
        }
      }
    }
  });
  return out;
}

/**
 * Position p's K row sits at cache block table[p / blockSize], slot p % blockSize; a
 * quantized row holds exactly the blocks ggml's reference quantizer makes of it.
 */
function checkSlots(
  s: Setup,
  type: KvType,
  table: Int32Array,
  cache: { u8(): Uint8Array; u16(): Uint16Array; f32(): Float32Array },
  keys: Float32Array,
  lastPos: number,
  what: string,
): void {
  const width = s.nKvHeads * s.headDim;
  const q = quant(type);
  for (const p of [0, Math.floor(lastPos / 2), lastPos]) {
    const slot = table[Math.floor(p / s.blockSize)] * s.blockSize + (p % s.blockSize);
    const row = keys.subarray(p * width, (p + 1) * width);
    if (q !== undefined) {
      const want = quantizeRow(q, row);
      const got = cache.u8().subarray(slot * want.length, (slot + 1) * want.length);
      assertEquals(got, want, `${what}: slot of position ${p}`);
      continue;
    }
    const held = stored(type, row);
    for (const i of [0, width - 1]) {
      const raw = type === KV_F16
        ? f16ToF32(cache.u16()[slot * width + i])
        : cache.f32()[slot * width + i];
      assertEquals(raw, held[i], `${what}: slot of position ${p}`);
    }
  }
}

Deno.test("kv ops reject positions outside the block table and blocks outside the cache", async () => {
  const k = await testKernels();
  const pool = k.createPool(1);
  const layout: KvLayout = { type: KV_F32, nBlocks: 2, blockSize: 4, nKvHeads: 1, headDim: 8 };
  const kc = k.alloc(2 * 4 * 8 * 4), vc = k.alloc(2 * 4 * 8 * 4);
  const kv = new Float32Array(8);
  for (
    const [table, pos] of [[Int32Array.of(0), Int32Array.of(4)], [
      Int32Array.of(2),
      Int32Array.of(0),
    ], [Int32Array.of(0), Int32Array.of(-1)]]
  ) {
    const err = assertThrows(
      () => pool.kvStore(layout, kc, vc, one(table, 1), pos, kv, kv),
      CpuKernelError,
    );
    assertEquals(err.code, "cpu_kernel_invalid");
    assertThrows(
      () => pool.attention(layout, kv, kv, kc, vc, one(table, 1), pos, 1, 1),
      CpuKernelError,
    );
  }
  assertThrows(
    () => pool.attention(layout, kv, kv, kc, vc, one(Int32Array.of(0), 1), Int32Array.of(0), 3, 1),
    CpuKernelError,
  );
  kc.free();
  vc.free();
  pool.destroy();
});

Deno.test("one kv_store + attention over many sequences equals one call per sequence", async () => {
  const k = await testKernels();
  const rng = new Rng(23);
  const layout: KvLayout = { type: KV_F16, nBlocks: 40, blockSize: 4, nKvHeads: 2, headDim: 64 };
  const nHeads = 4, kvWidth = 2 * 64, qWidth = nHeads * 64, scale = 0.125;
  // A decode step's company: single tokens deep in their sequences and a prompt chunk,
  // each sequence on its own blocks.
  const spans = [{ from: 9, count: 1 }, { from: 0, count: 6 }, { from: 14, count: 1 }, {
    from: 3,
    count: 2,
  }];
  let row = 0, block = 0;
  const sequences: KvSequence[] = spans.map(({ from, count }) => {
    const blocks = Math.floor((from + count - 1) / layout.blockSize) + 1;
    const blockTable = Int32Array.from({ length: blocks }, () => block++);
    const s = { rowStart: row, rowCount: count, blockTable };
    row += count;
    return s;
  });
  const positions = Int32Array.from(
    spans.flatMap(({ from, count }) => range(from, from + count)),
  );
  const keys = randomF32(rng, row * kvWidth), vals = randomF32(rng, row * kvWidth);
  const queries = randomF32(rng, row * qWidth);
  const bytes = layout.nBlocks * layout.blockSize * kvWidth * 2;
  for (const threads of [1, 2]) {
    const pool = k.createPool(threads);
    const caches = [0, 1].map(() => [k.alloc(bytes), k.alloc(bytes)]);
    // Earlier positions of every sequence, so attention reads history as well.
    for (const [kc, vc] of caches) {
      kc.u8().set(new Uint8Array(randomF32(new Rng(5), bytes / 4).buffer));
      vc.u8().set(new Uint8Array(randomF32(new Rng(6), bytes / 4).buffer));
    }
    const [[kb, vb], [ks, vs]] = caches;
    const batched = new Float32Array(row * qWidth).fill(NaN);
    pool.kvStore(layout, kb, vb, sequences, positions, keys, vals);
    pool.attention(layout, batched, queries, kb, vb, sequences, positions, nHeads, scale);
    const single = new Float32Array(row * qWidth).fill(NaN);
    for (const s of sequences) {
      const rows = (w: number, a: Float32Array): Float32Array =>
        a.subarray(s.rowStart * w, (s.rowStart + s.rowCount) * w);
      const pos = positions.subarray(s.rowStart, s.rowStart + s.rowCount);
      const own = one(s.blockTable, s.rowCount);
      pool.kvStore(layout, ks, vs, own, pos, rows(kvWidth, keys), rows(kvWidth, vals));
      pool.attention(
        layout,
        rows(qWidth, single),
        rows(qWidth, queries),
        ks,
        vs,
        own,
        pos,
        nHeads,
        scale,
      );
    }
    assertEquals(batched, single, `threads=${threads}`);
    assertEquals(kb.u8(), ks.u8(), `cache, threads=${threads}`);
    for (const b of caches.flat()) b.free();
    pool.destroy();
  }
});
