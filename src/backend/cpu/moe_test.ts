/**
 * Checker for the mixture-of-experts kernels (kernels/cpu/moe_route.c, moe.c) at every
 * dispatch level and thread count:
 *
 * - nk_moe_route against the TypeScript routing (reference/expert_routing.ts): the same
 *   experts in the same order, ties included, and the same weights to an ulp or two (expf
 *   against Math.exp);
 * - nk_matmul_experts against its plain reference (nk_matmul_ref row by row) and against
 *   the dense kernel on each (token, slot) row alone, on expert counts that take the
 *   row-by-row path (a few rows per expert) and the panels (many), x shared by a token's
 *   slots or one row per slot, experts in place at a stride longer than an expert;
 * - nk_moe_combine bit for bit against the f32 sum of reference/expert_routing.ts;
 * - bad expert indices refused, the outputs untouched.
 */

import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { everyPool, randomF32, relError, testKernels } from "../../../tests/support/cpu_kernels.ts";
import { ggmlTypeByName, randomBlocks, Rng } from "../../gguf/mod.ts";
import { rowBytes } from "../../gguf/types.ts";
import { combineToken, routeToken } from "../reference/expert_routing.ts";
import { CpuKernelError } from "./errors.ts";

/** Logits with many exact ties (steps of 1/4) or none. */
function routerLogits(rng: Rng, n: number, tied: boolean): Float32Array {
  const out = randomF32(rng, n, 2);
  if (tied) { for (let i = 0; i < n; i++) out[i] = Math.round(out[i] * 2) / 4; }
  return out;
}

Deno.test("moeRoute: the experts, order and weights of the TypeScript routing, ties included", async () => {
  const rng = new Rng(11);
  const cases: Array<[number, number, boolean]> = [
    [4, 1, false],
    [16, 4, true],
    [17, 4, true],
    [64, 8, false],
    [128, 8, true],
    [128, 8, false],
    [512, 16, true],
  ];
  await everyPool((pool, what) => {
    for (const [experts, k, tied] of cases) {
      for (const normalize of [true, false]) {
        const rows = 9;
        const logits = routerLogits(rng, rows * experts, tied);
        const ids = new Float32Array(rows * k).fill(NaN);
        const weights = new Float32Array(rows * k).fill(NaN);
        pool.moeRoute(logits, rows, experts, k, normalize, ids, weights);
        for (let t = 0; t < rows; t++) {
          const wantIds = new Int32Array(k), wantW = new Float32Array(k);
          routeToken(logits.subarray(t * experts, (t + 1) * experts), normalize, wantIds, wantW);
          const tag = `${what} ${experts} experts top ${k} tied=${tied} norm=${normalize} row ${t}`;
          assertEquals([...ids.subarray(t * k, (t + 1) * k)], [...wantIds], `${tag}: experts`);
          for (let j = 0; j < k; j++) {
            const got = weights[t * k + j], want = wantW[j];
            assert(
              Math.abs(got - want) <= 4e-7 * Math.abs(want),
              `${tag}: weight ${got} vs ${want}`,
            );
          }
        }
      }
    }
  });
});

Deno.test("moeRoute: a tie at the k-th expert or inside the top k still takes std::sort's order", async () => {
  // Distinct scores take a selection, ties the sort: each case sits on that boundary.
  const base = Array.from({ length: 64 }, (_, e) => -e / 8);
  const cases: Array<[string, number[]]> = [
    ["k-th tied with the next", base.map((v, e) => (e === 8 ? base[7] : v))],
    ["k-th tied with one far below", base.map((v, e) => (e === 40 ? base[7] : v))],
    ["two inside the top k tied", base.map((v, e) => (e === 3 ? base[2] : v))],
    ["tied only below the top k", base.map((v, e) => (e === 20 ? base[21] : v))],
    ["a NaN", base.map((v, e) => (e === 5 ? NaN : v))],
  ];
  await everyPool((pool, what) => {
    for (const [name, scores] of cases) {
      // Reversed, so index order and score order disagree.
      const logits = new Float32Array(scores.reverse());
      const ids = new Float32Array(8), weights = new Float32Array(8);
      pool.moeRoute(logits, 1, 64, 8, true, ids, weights);
      const wantIds = new Int32Array(8), wantW = new Float32Array(8);
      routeToken(logits, true, wantIds, wantW);
      assertEquals([...ids], [...wantIds], `${what} ${name}`);
    }
  });
});

Deno.test("moeRoute: all experts tied keeps std::sort's order, not the index order", () => {
  const logits = new Float32Array(128).fill(1.5);
  const ids = new Int32Array(8), w = new Float32Array(8);
  routeToken(logits, true, ids, w);
  // libstdc++'s introsort moves the median of three to the front first: with all values
  // equal, the chosen experts are not 0..7 (a stable sort would give those).
  assert([...ids].some((e, j) => e !== j), `tied routing gave ${[...ids]}`);
  for (const x of w) assertEquals(x, Math.fround(1 / 8));
});

interface ExpertCase {
  type: string;
  rows: number;
  cols: number;
  experts: number;
  tolerance: number;
}

const EXPERT_CASES: ExpertCase[] = [
  { type: "F32", rows: 37, cols: 64, experts: 6, tolerance: 1e-5 },
  { type: "F16", rows: 37, cols: 96, experts: 6, tolerance: 1e-5 },
  { type: "Q8_0", rows: 70, cols: 96, experts: 6, tolerance: 0.05 },
  { type: "Q4_0", rows: 37, cols: 64, experts: 5, tolerance: 0.05 },
  { type: "Q4_K", rows: 70, cols: 512, experts: 6, tolerance: 0.05 },
  { type: "Q6_K", rows: 37, cols: 256, experts: 5, tolerance: 0.05 },
  { type: "Q5_K", rows: 23, cols: 256, experts: 4, tolerance: 0.05 },
];

/** Levels and row paths agree this closely (they differ in summation order only). */
const PATH_TOLERANCE = 2e-4;

/**
 * ids for `tokens` tokens of k distinct experts each; with `crowd`, expert 1 is in every
 * token's choice (its rows then go through the panels).
 */
function expertIds(rng: Rng, tokens: number, k: number, experts: number, crowd: boolean) {
  const ids = new Float32Array(tokens * k);
  for (let t = 0; t < tokens; t++) {
    const pool = Array.from({ length: experts }, (_, e) => e).filter((e) => !crowd || e !== 1);
    for (let j = 0; j < k; j++) {
      const e = crowd && j === k - 1 ? 1 : pool.splice(rng.int(pool.length), 1)[0];
      ids[t * k + j] = e;
    }
  }
  return ids;
}

for (const c of EXPERT_CASES) {
  Deno.test(`matmulExperts ${c.type}: every level, path and x layout matches the references`, async () => {
    const info = ggmlTypeByName(c.type)!;
    const rng = new Rng(info.id * 31 + 5);
    const rb = rowBytes(info, c.cols);
    // Experts at a stride of one expert and a half: a rank's rows of each, in place.
    const stride = Math.ceil((1.5 * c.rows * rb) / 64) * 64;
    const w = new Uint8Array(stride * c.experts);
    for (let e = 0; e < c.experts; e++) {
      w.set(randomBlocks(info, (c.rows * c.cols) / info.blockSize, rng), e * stride);
    }
    // 300 x 3: many rows per expert, which repacked experts write straight into their slots'
    // rows and the others copy back to slot order.
    const shapes: Array<[number, number, boolean]> = [
      [1, 1, false],
      [1, 4, false],
      [3, 2, false],
      [40, 3, true],
      [300, 3, true],
    ];
    const k = await testKernels();
    const refPool = k.createPool(1);
    try {
      for (const [tokens, top, crowd] of shapes) {
        for (const perSlot of [false, true]) {
          const ids = expertIds(rng, tokens, top, c.experts, crowd);
          const xRows = perSlot ? tokens * top : tokens;
          const x = randomF32(rng, xRows * c.cols);
          const n = tokens * top;
          const ref = new Float32Array(n * c.rows);
          const mat = { type: info.id, w, stride, rows: c.rows };
          refPool.matmulExpertsRef(
            { ...mat, y: ref },
            c.experts,
            c.cols,
            x,
            xRows,
            ids,
            tokens,
            top,
          );
          const alone = new Float32Array(n * c.rows);
          for (let s = 0; s < n; s++) {
            const row = perSlot ? s : Math.floor(s / top);
            refPool.matmul(
              info.id,
              w.subarray(ids[s] * stride),
              c.rows,
              c.cols,
              x.subarray(row * c.cols, (row + 1) * c.cols),
              1,
              alone.subarray(s * c.rows, (s + 1) * c.rows),
            );
          }
          await everyPool((pool, what) => {
            const y = new Float32Array(n * c.rows).fill(NaN);
            pool.matmulExperts([{ ...mat, y }], c.experts, c.cols, x, xRows, ids, tokens, top);
            const tag = `${c.type} ${what} ${tokens}x${top} perSlot=${perSlot}`;
            const err = relError(y, ref);
            assert(err <= c.tolerance, `${tag}: error ${err} vs reference`);
            const e2 = relError(y, alone);
            assert(e2 <= PATH_TOLERANCE, `${tag}: differs from the dense kernel alone by ${e2}`);
          });
        }
      }
    } finally {
      refPool.destroy();
    }
  });
}

Deno.test("matmulExperts: two stacks sharing x (gate and up) equal each alone", async () => {
  const info = ggmlTypeByName("Q4_K")!;
  const rng = new Rng(3);
  const [rows, cols, experts, tokens, top] = [45, 256, 8, 5, 3];
  const bytes = rows * rowBytes(info, cols);
  const stacks = [0, 1].map(() => randomBlocks(info, (experts * rows * cols) / 256, rng));
  const ids = expertIds(rng, tokens, top, experts, false);
  const x = randomF32(rng, tokens * cols);
  await everyPool((pool, what) => {
    const both = stacks.map(() => new Float32Array(tokens * top * rows));
    pool.matmulExperts(
      stacks.map((w, m) => ({ type: info.id, w, stride: bytes, rows, y: both[m] })),
      experts,
      cols,
      x,
      tokens,
      ids,
      tokens,
      top,
    );
    stacks.forEach((w, m) => {
      const y = new Float32Array(tokens * top * rows);
      pool.matmulExperts(
        [{ type: info.id, w, stride: bytes, rows, y }],
        experts,
        cols,
        x,
        tokens,
        ids,
        tokens,
        top,
      );
      assertEquals(both[m], y, `${what}: stack ${m}`);
    });
  });
});

Deno.test("moeCombine: bit for bit the f32 sum in slot order", async () => {
  const rng = new Rng(5);
  for (const [tokens, k, cols] of [[1, 8, 2048], [3, 4, 64], [40, 8, 1024]]) {
    const experts = randomF32(rng, tokens * k * cols);
    const weights = randomF32(rng, tokens * k, 0.3);
    const want = new Float32Array(tokens * cols);
    for (let t = 0; t < tokens; t++) {
      combineToken(
        want.subarray(t * cols, (t + 1) * cols),
        experts.subarray(t * k * cols, (t + 1) * k * cols),
        weights.subarray(t * k, (t + 1) * k),
      );
    }
    await everyPool((pool, what) => {
      const out = new Float32Array(tokens * cols).fill(NaN);
      pool.moeCombine(out, experts, weights, tokens, k, cols);
      assertEquals(out, want, `${what} ${tokens}x${k}x${cols}`);
    });
  }
});

Deno.test("matmulExperts: an expert index outside the stack (or not an integer) is refused and nothing is written", async () => {
  const info = ggmlTypeByName("Q8_0")!;
  const rng = new Rng(9);
  const [rows, cols, experts] = [8, 64, 4];
  const w = randomBlocks(info, (experts * rows * cols) / 32, rng);
  const stride = rows * rowBytes(info, cols);
  const x = randomF32(rng, 2 * cols);
  await everyPool((pool) => {
    for (const bad of [4, -1, 1.5, NaN]) {
      const ids = Float32Array.of(0, bad);
      const y = new Float32Array(2 * rows).fill(7);
      const err = assertThrows(
        () =>
          pool.matmulExperts(
            [{ type: info.id, w, stride, rows, y }],
            experts,
            cols,
            x,
            1,
            ids,
            1,
            2,
          ),
        CpuKernelError,
      );
      assertEquals(err.code, "cpu_kernel_invalid");
      assert(y.every((v) => v === 7), `expert ${bad}: outputs written`);
    }
  });
});

Deno.test("moe ops: shapes that do not fit are refused when recorded", async () => {
  const k = await testKernels();
  const pool = k.createPool(1);
  try {
    const buf = new Float32Array(64);
    for (
      const f of [
        () => pool.moeRoute(buf, 1, 600, 8, true, buf, buf),
        () => pool.moeRoute(buf, 1, 8, 9, true, buf, buf),
        () => pool.moeCombine(buf, buf, buf, 4, 8, 64),
        () =>
          pool.matmulExperts(
            [{ type: 0, w: buf, stride: 4, rows: 2, y: buf }],
            2,
            4,
            buf,
            3,
            buf,
            2,
            2,
          ),
      ]
    ) assertEquals(assertThrows(f, CpuKernelError).code, "cpu_kernel_invalid");
  } finally {
    pool.destroy();
  }
});

/** libc's mmap/mprotect/munmap, to put experts behind pages no load may touch. */
function libc() {
  return Deno.dlopen("libc.so.6", {
    mmap: { parameters: ["pointer", "usize", "i32", "i32", "i32", "isize"], result: "pointer" },
    mprotect: { parameters: ["pointer", "usize", "i32"], result: "i32" },
    munmap: { parameters: ["pointer", "usize"], result: "i32" },
  });
}

Deno.test("matmulExperts reads only the chosen experts: the others sit on pages no load may touch", async () => {
  const [PROT_NONE, PROT_RW, MAP_PRIVATE_ANON] = [0, 3, 0x22];
  const info = ggmlTypeByName("Q4_K")!;
  const [rows, cols, experts, tokens, top] = [64, 512, 8, 3, 2];
  const bytes = rows * rowBytes(info, cols);
  const stride = Math.ceil(bytes / 4096) * 4096;
  const c = libc();
  const size = BigInt(stride * experts);
  const base = c.symbols.mmap(null, size, PROT_RW, MAP_PRIVATE_ANON, -1, 0n)!;
  try {
    const view = new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(base, stride * experts));
    const rng = new Rng(21);
    for (let e = 0; e < experts; e++) {
      view.set(randomBlocks(info, (rows * cols) / 256, rng), e * stride);
    }
    const chosen = [1, 4, 6];
    for (let e = 0; e < experts; e++) {
      if (chosen.includes(e)) continue;
      const at = Deno.UnsafePointer.offset(base, e * stride)!;
      assertEquals(c.symbols.mprotect(at, BigInt(stride), PROT_NONE), 0);
    }
    const ids = Float32Array.of(1, 4, 6, 1, 4, 6);
    const x = randomF32(rng, tokens * cols);
    const ref = new Float32Array(tokens * top * rows);
    await everyPool((pool, what) => {
      const y = new Float32Array(tokens * top * rows);
      pool.matmulExperts(
        [{ type: info.id, w: base, stride, rows, y }],
        experts,
        cols,
        x,
        tokens,
        ids,
        tokens,
        top,
      );
      if (ref.every((v) => v === 0)) {
        pool.matmulExpertsRef(
          { type: info.id, w: base, stride, rows, y: ref },
          experts,
          cols,
          x,
          tokens,
          ids,
          tokens,
          top,
        );
      }
      assert(relError(y, ref) <= 0.05, `${what}: products of the chosen experts`);
    });
  } finally {
    c.symbols.munmap(base, size);
    c.close();
  }
});
