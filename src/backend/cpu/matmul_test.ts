/**
 * Checker for nk_matmul on every type: random valid blocks on odd shapes (rows that fill no
 * panel or thread evenly, legacy rows ending in a partial chunk), every token count from
 * decode to prefill tiles with remainders, every dispatch level of this CPU, 1 and 2
 * threads (with page prefetching off and on). Three oracles: the TypeScript dequantizer (bit-exact against the C reference
 * dequantizer), nk_matmul_ref (f64 dot of dequantized rows) and the scalar level.
 *
 * Tolerances: quantized types quantize activations to int8 per 32 values (K-quants per
 * 256, ggml's Q8_K; scale amax/127), an error of up to half a step per value: about 0.7%
 * (per 256: 1-2%) of a typical output, so the worst of thousands of outputs lands near 3%;
 * float types only reorder f32 sums.
 * Levels agree with each other far more tightly: they quantize identically and differ in
 * summation order only.
 */

import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { dequantize, ggmlTypeByName, randomBlocks, Rng } from "../../gguf/mod.ts";
import { randomF32, relError, testKernels } from "../../../tests/support/cpu_kernels.ts";

/** Around each type's panel threshold (nk_isa_ops.pack_min_tokens), the small batches of
 * batched decode and speculative verification (16, 17, 32 rows: panel tiles of 6 tokens with
 * remainders) and past a tile. */
const TOKEN_COUNTS = [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 32, 33, 130];
const MAX_TOKENS = 130;

interface Case {
  type: string;
  shapes: Array<[number, number]>;
  tolerance: number;
}

const CASES: Case[] = [
  { type: "F32", shapes: [[37, 67], [70, 300]], tolerance: 1e-5 },
  { type: "F16", shapes: [[37, 67], [70, 300]], tolerance: 1e-5 },
  { type: "BF16", shapes: [[37, 67], [70, 300]], tolerance: 1e-5 },
  { type: "Q4_0", shapes: [[37, 96], [70, 800]], tolerance: 0.05 },
  { type: "Q4_1", shapes: [[37, 96], [70, 800]], tolerance: 0.05 },
  { type: "Q5_0", shapes: [[37, 96], [70, 800]], tolerance: 0.05 },
  { type: "Q5_1", shapes: [[37, 96], [70, 800]], tolerance: 0.05 },
  { type: "Q8_0", shapes: [[37, 96], [70, 800], [59, 512]], tolerance: 0.05 },
  { type: "Q2_K", shapes: [[37, 256], [70, 768]], tolerance: 0.05 },
  { type: "Q3_K", shapes: [[37, 256], [70, 768]], tolerance: 0.05 },
  { type: "Q4_K", shapes: [[37, 256], [70, 768], [59, 512], [23, 1280]], tolerance: 0.05 },
  { type: "Q5_K", shapes: [[37, 256], [70, 768]], tolerance: 0.05 },
  { type: "Q6_K", shapes: [[37, 256], [70, 768], [59, 512], [23, 1280]], tolerance: 0.05 },
];

/** Levels agree this closely (relative to the output scale). */
const LEVEL_TOLERANCE = 2e-4;

for (const c of CASES) {
  Deno.test(`matmul ${c.type}: every level and thread count matches the references`, async () => {
    const k = await testKernels();
    const info = ggmlTypeByName(c.type)!;
    const rng = new Rng(info.id * 7919 + 1);
    const pools = [k.createPool(1), k.createPool(2)];
    // The two-thread pool reads its weights as if in place from a file mapping.
    pools[1].pagePrefetch = true;
    try {
      for (const [rows, cols] of c.shapes) {
        const w = randomBlocks(info, (rows * cols) / info.blockSize, rng);
        const x = randomF32(rng, MAX_TOKENS * cols);

        const deq = dequantize(info, w, rows * cols);
        const deqC = new Float32Array(rows * cols);
        k.dequantizeRows(info.id, w, rows, cols, deqC);
        assertEquals(deqC, deq, `${c.type}: C and TypeScript dequantizers differ`);

        const ref = new Float32Array(MAX_TOKENS * rows);
        pools[1].matmulRef(info.id, w, rows, cols, x, MAX_TOKENS, ref);
        for (const t of [0, 1, MAX_TOKENS - 1]) {
          for (let r = 0; r < rows; r++) {
            let sum = 0;
            for (let i = 0; i < cols; i++) sum += deq[r * cols + i] * x[t * cols + i];
            assert(Math.abs(ref[t * rows + r] - sum) <= 1e-6 * (1 + Math.abs(sum)));
          }
        }

        for (const n of TOKEN_COUNTS) {
          const want = ref.subarray(0, n * rows);
          let scalar: Float32Array | undefined;
          for (const isa of k.supportedIsas()) {
            for (const pool of pools) {
              pool.isa = isa;
              const y = new Float32Array(n * rows).fill(NaN);
              pool.matmul(info.id, w, rows, cols, x, n, y);
              const what = `${c.type} ${rows}x${cols} n=${n} ${isa} threads=${pool.threads}`;
              const err = relError(y, want);
              assert(err <= c.tolerance, `${what}: error ${err} vs reference`);
              if (scalar === undefined) {
                scalar = y;
              } else {
                const e = relError(y, scalar);
                assert(e <= LEVEL_TOLERANCE, `${what}: differs from scalar level by ${e}`);
              }
            }
          }
        }
      }
    } finally {
      for (const p of pools) p.destroy();
    }
  });
}

/** Per-32 activations: a product sharing them with a matrix that is not a K-quant. */
Deno.test("matmulMany: K-quants sharing activations with Q8_0 (per-32 kernels) match the references", async () => {
  const k = await testKernels();
  const rng = new Rng(77);
  const cols = 1280, nTokens = 3;
  const x = randomF32(rng, nTokens * cols);
  const mats = ["Q4_K", "Q5_K", "Q6_K", "Q8_0"].map((name, i) => {
    const info = ggmlTypeByName(name)!;
    const rows = 19 + 8 * i;
    return { info, rows, w: randomBlocks(info, (rows * cols) / info.blockSize, rng) };
  });
  const pool = k.createPool(2);
  try {
    const refs = mats.map((m) => {
      const ref = new Float32Array(nTokens * m.rows);
      pool.matmulRef(m.info.id, m.w, m.rows, cols, x, nTokens, ref);
      return ref;
    });
    let scalar: Float32Array[] | undefined;
    for (const isa of k.supportedIsas()) {
      pool.isa = isa;
      const ys = mats.map((m) => new Float32Array(nTokens * m.rows).fill(NaN));
      pool.matmulMany(
        mats.map((m, i) => ({ type: m.info.id, w: m.w, rows: m.rows, y: ys[i] })),
        cols,
        x,
        nTokens,
      );
      ys.forEach((y, i) => {
        const err = relError(y, refs[i]);
        // Per-32 activations: as close as the per-32 types get alone.
        assert(err <= 0.03, `${mats[i].info.name} ${isa}: error ${err} vs reference`);
        if (scalar) {
          const e = relError(y, scalar[i]);
          assert(e <= LEVEL_TOLERANCE, `${mats[i].info.name} ${isa}: differs from scalar by ${e}`);
        }
      });
      scalar ??= ys;
    }
  } finally {
    pool.destroy();
  }
});

/**
 * Float weights: a batch gives each of its tokens the bits of that token's own product, so
 * batching requests (MoE routers, embedding heads) changes no result. Row kernels sum each
 * (row, token) alone; AVX-512 keeps float products on them up to 47 tokens (F32) and 64
 * (F16, BF16), other levels up to 8.
 */
Deno.test("matmul float types: a batch's rows are each token's own product, bit for bit", async () => {
  const k = await testKernels();
  const [rows, cols] = [70, 300];
  for (const type of ["F32", "F16", "BF16"]) {
    const info = ggmlTypeByName(type)!;
    const rng = new Rng(info.id * 31 + 5);
    const w = randomBlocks(info, (rows * cols) / info.blockSize, rng);
    const x = randomF32(rng, 47 * cols);
    const pool = k.createPool(2);
    try {
      for (const isa of k.supportedIsas()) {
        pool.isa = isa;
        const counts = isa.startsWith("avx512") ? [8, 16, 47] : [8];
        for (const n of counts) {
          const batch = new Float32Array(n * rows);
          pool.matmul(info.id, w, rows, cols, x, n, batch);
          for (const t of [0, n >> 1, n - 1]) {
            const one = new Float32Array(rows);
            pool.matmul(info.id, w, rows, cols, x.subarray(t * cols, (t + 1) * cols), 1, one);
            assertEquals(
              batch.subarray(t * rows, (t + 1) * rows),
              one,
              `${type} ${isa} n=${n}: token ${t}`,
            );
          }
        }
      }
    } finally {
      pool.destroy();
    }
  }
});

/**
 * The row path deals each thread a share of work items and lets idle threads take runs from
 * the others' ends (nk_pool_claim). Oversubscribed (8 threads on this machine's few cores),
 * threads are preempted mid-share and runs change hands often; every item must still be
 * computed exactly where one thread alone computes it: a skipped item leaves NaN, an item
 * given to the wrong rows differs.
 */
Deno.test("matmul: every thread count computes every work item, bit for bit one thread's", async () => {
  const k = await testKernels();
  const info = ggmlTypeByName("Q8_0")!;
  const rng = new Rng(4242);
  // 68-byte rows: about a hundred 16 KiB work items.
  const [rows, cols] = [24000, 64];
  const w = randomBlocks(info, (rows * cols) / info.blockSize, rng);
  const x = randomF32(rng, 5 * cols);
  const pools = [1, 2, 3, 8].map((n) => k.createPool(n));
  try {
    for (const n of [1, 5]) {
      const one = new Float32Array(n * rows);
      pools[0].matmul(info.id, w, rows, cols, x, n, one);
      assert(one.every(Number.isFinite), `n=${n}: one thread left rows unwritten`);
      for (const pool of pools.slice(1)) {
        for (let rep = 0; rep < 20; rep++) {
          const y = new Float32Array(n * rows).fill(NaN);
          pool.matmul(info.id, w, rows, cols, x, n, y);
          assertEquals(y, one, `n=${n} threads=${pool.threads} repeat ${rep}`);
        }
      }
    }
  } finally {
    for (const p of pools) p.destroy();
  }
});
