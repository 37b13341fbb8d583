/**
 * Checker for repacked weights (kernels/cpu/repack.c, kern_avx512_r16.c): a matrix repacked
 * computes what the same matrix unpacked does, at every token count from one decode to
 * prefill tiles with remainders, every dispatch level (levels without the AVX-512 kernel run
 * the plain C one) and 1 and 2 threads, also with every quant bit set (the integer sums at
 * their bounds); its rows dequantize bit for bit as the GGUF rows (embedding lookups of tied
 * output matrices read them), a repacked matrix shares one matmulMany call with unpacked ones
 * on the panel path, expert stacks repacked at load compute what they do unpacked, and a copy
 * the host cannot hold is not made.
 */

import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { ggmlTypeByName, type GgmlTypeInfo, randomBlocks, Rng } from "../../gguf/mod.ts";
import { everyPool, randomF32, relError, testKernels } from "../../../tests/support/cpu_kernels.ts";
import { rowBytes } from "../../gguf/types.ts";
import type { CpuExperts } from "./cpu_experts.ts";
import type { Pool } from "./pool.ts";
import { REPACKED_TYPES } from "./kernel_types.ts";
import { repackExperts, repackWeight } from "./repacked.ts";
import { WeightArena } from "./weight_arena.ts";
import { CpuBackend } from "./cpu_backend.ts";
import { weight } from "./handles.ts";

const TOKEN_COUNTS = [1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 70];
const MAX_TOKENS = 70;
/** As the unpacked kernels against the reference (matmul_test.ts says why). */
const TOLERANCE = 0.05;
/** Against the unpacked kernels, which quantize the activations alike: summation order. */
const SAME_TOLERANCE = 2e-4;

const k = await testKernels();
const canRepack = k.repackedType(ggmlTypeByName("Q8_0")!.id) !== null;

function repacked(pool: Pool, info: GgmlTypeInfo, w: Uint8Array, rows: number, cols: number) {
  const type = k.repackedType(info.id)!;
  const out = new Uint8Array(rows * k.rowBytes(type, cols));
  pool.repack(info.id, w, rows, cols, out);
  return { type, w: out };
}

/** [rows, cols]: one group, groups that fill no tile of four evenly, a K-quant row of five
 * super-blocks. */
const SHAPES: Record<string, Array<[number, number]>> = {
  Q8_0: [[16, 96], [80, 512], [48, 1280]],
  Q4_K: [[16, 256], [80, 512], [48, 1280]],
  Q6_K: [[16, 256], [80, 512], [48, 1280]],
};

for (const name of Object.keys(SHAPES)) {
  Deno.test({
    name: `repacked ${name}: every token count, level and thread count matches the matrix unpacked`,
    ignore: !canRepack,
    fn() {
      const info = ggmlTypeByName(name)!;
      const rng = new Rng(info.id * 31 + 5);
      const pools = [k.createPool(1), k.createPool(2)];
      try {
        for (const [rows, cols] of SHAPES[name]) {
          const w = randomBlocks(info, (rows * cols) / info.blockSize, rng);
          const r = repacked(pools[1], info, w, rows, cols);
          const plainRows = new Float32Array(rows * cols),
            packedRows = new Float32Array(rows * cols);
          k.dequantizeRows(info.id, w, rows, cols, plainRows);
          k.dequantizeRows(r.type, r.w, rows, cols, packedRows);
          assertEquals(
            packedRows,
            plainRows,
            `${name} ${rows}x${cols}: rows dequantize differently`,
          );

          const x = randomF32(rng, MAX_TOKENS * cols);
          const ref = new Float32Array(MAX_TOKENS * rows);
          pools[1].matmulRef(r.type, r.w, rows, cols, x, MAX_TOKENS, ref);
          for (const n of TOKEN_COUNTS) {
            const want = ref.subarray(0, n * rows);
            for (const isa of k.supportedIsas()) {
              for (const pool of pools) {
                pool.isa = isa;
                const what = `${name} ${rows}x${cols} n=${n} ${isa} threads=${pool.threads}`;
                const plain = new Float32Array(n * rows).fill(NaN);
                pool.matmul(info.id, w, rows, cols, x, n, plain);
                const y = new Float32Array(n * rows).fill(NaN);
                pool.matmul(r.type, r.w, rows, cols, x, n, y);
                assert(relError(y, want) <= TOLERANCE, `${what}: error ${relError(y, want)}`);
                const e = relError(y, plain);
                assert(e <= SAME_TOLERANCE, `${what}: differs from the unpacked matrix by ${e}`);
              }
            }
          }
        }
      } finally {
        for (const p of pools) p.destroy();
      }
    },
  });
}

/** A block of `info` whose every quant bit is set: Q4_K's nibbles, sub-block scales and mins
 * at 15, 63 and 63, Q6_K's values at 63 and its group scales alternating 127 and -128; the
 * f16 scales at 2^-9. */
function saturatedBlock(info: GgmlTypeInfo): Uint8Array {
  const b = new Uint8Array(info.typeSize).fill(0xff);
  const view = new DataView(b.buffer);
  if (info.name === "Q4_K") {
    view.setUint16(0, 0x1800, true);
    view.setUint16(2, 0x1800, true);
  } else {
    for (let g = 0; g < 16; g++) b[192 + g] = g % 2 ? 0x80 : 0x7f;
    view.setUint16(208, 0x1800, true);
  }
  return b;
}

Deno.test({
  name:
    "repacked Q4_K and Q6_K: integer sums at their largest stay exact (no int32 or int16 wraps)",
  ignore: !canRepack,
  fn() {
    // Every activation at the quantizer's largest magnitude (127), one sign per token, the
    // last token alternating by block of 32: each kernel's integer sums (Q4_K's high nibbles
    // counted 16 times over, the mins' sums of 32, Q6_K's scaled groups) reach their bounds.
    const rows = 32, cols = 1024, n = 9;
    const pool = k.createPool(2);
    try {
      for (const name of ["Q4_K", "Q6_K"]) {
        const info = ggmlTypeByName(name)!;
        const block = saturatedBlock(info);
        const w = new Uint8Array((rows * cols / info.blockSize) * info.typeSize);
        for (let at = 0; at < w.length; at += block.length) w.set(block, at);
        const r = repacked(pool, info, w, rows, cols);
        const x = new Float32Array(n * cols);
        for (let t = 0; t < n; t++) {
          for (let c = 0; c < cols; c++) {
            x[t * cols + c] = t === n - 1 ? (Math.floor(c / 32) % 2 ? -1 : 1) : t % 2 ? -1 : 1;
          }
        }
        const want = new Float32Array(n * rows);
        pool.matmulRef(info.id, w, rows, cols, x, n, want);
        for (const isa of k.supportedIsas()) {
          pool.isa = isa;
          for (const tokens of [1, 5, 8, 9]) {
            const y = new Float32Array(tokens * rows).fill(NaN);
            pool.matmul(r.type, r.w, rows, cols, x, tokens, y);
            const e = relError(y, want.subarray(0, tokens * rows));
            assert(e <= SAME_TOLERANCE, `${name} ${isa} ${tokens} tokens: error ${e}`);
          }
        }
      }
    } finally {
      pool.destroy();
    }
  },
});

Deno.test({
  name: "repacked: embedding lookups, mixed matmulMany calls and bad shapes",
  ignore: !canRepack,
  fn() {
    const rng = new Rng(404);
    const pool = k.createPool(2);
    try {
      const q8 = ggmlTypeByName("Q8_0")!, q5 = ggmlTypeByName("Q5_K")!;
      const cols = 512, rows = 48;
      const w8 = randomBlocks(q8, (rows * cols) / q8.blockSize, rng);
      const r = repacked(pool, q8, w8, rows, cols);

      const ids = Int32Array.of(0, 17, 47, 31);
      const a = new Float32Array(ids.length * cols), b = new Float32Array(ids.length * cols);
      pool.getRows(q8.id, w8, rows, cols, ids, a);
      pool.getRows(r.type, r.w, rows, cols, ids, b);
      assertEquals(b, a);

      // Q5_K goes through panels at 16 tokens, the repacked Q8_0 by its rows, in one call.
      const w5 = randomBlocks(q5, (rows * cols) / q5.blockSize, rng);
      for (const n of [3, 16]) {
        const x = randomF32(rng, n * cols);
        // The same call unpacked: Q5_K shares per-32 activations with Q8_0 in both.
        const want = [new Float32Array(n * rows), new Float32Array(n * rows)];
        pool.matmulMany(
          [{ type: q8.id, w: w8, rows, y: want[0] }, { type: q5.id, w: w5, rows, y: want[1] }],
          cols,
          x,
          n,
        );
        const ys = [new Float32Array(n * rows).fill(NaN), new Float32Array(n * rows).fill(NaN)];
        pool.matmulMany(
          [{ type: r.type, w: r.w, rows, y: ys[0] }, { type: q5.id, w: w5, rows, y: ys[1] }],
          cols,
          x,
          n,
        );
        assert(relError(ys[0], want[0]) <= SAME_TOLERANCE, `n=${n}: repacked Q8_0 in matmulMany`);
        assert(relError(ys[1], want[1]) <= SAME_TOLERANCE, `n=${n}: Q5_K beside it`);
      }

      // A repacked Q6_K beside Q8_0 gets per-32 activations only: the plain C kernel's
      // case. So does a repacked Q4_K: its tile then scales each sub-block in floats.
      for (const name of ["Q6_K", "Q4_K"]) {
        const type = ggmlTypeByName(name)!;
        const wk = randomBlocks(type, (rows * cols) / type.blockSize, rng);
        const rk = repacked(pool, type, wk, rows, cols);
        for (const n of [1, 5]) {
          const x = randomF32(rng, n * cols);
          const want = new Float32Array(n * rows);
          pool.matmulRef(type.id, wk, rows, cols, x, n, want);
          const ys = [new Float32Array(n * rows).fill(NaN), new Float32Array(n * rows).fill(NaN)];
          pool.matmulMany(
            [{ type: r.type, w: r.w, rows, y: ys[0] }, { type: rk.type, w: rk.w, rows, y: ys[1] }],
            cols,
            x,
            n,
          );
          assert(relError(ys[1], want) <= TOLERANCE, `n=${n}: repacked ${name} beside Q8_0`);
        }
      }

      // Rows must come in whole groups of sixteen.
      const odd = randomBlocks(q8, (40 * cols) / q8.blockSize, rng);
      assertThrows(() => pool.repack(q8.id, odd, 40, cols, new Uint8Array(odd.length)));
      const x = randomF32(rng, cols);
      assertThrows(() => pool.matmul(r.type, r.w, 40, cols, x, 1, new Float32Array(40)));
      assertThrows(() => pool.repack(q5.id, w5, rows, cols, new Uint8Array(w5.length)));
    } finally {
      pool.destroy();
    }
  },
});

/** Types the kernels repack are named in repacked.ts under the ids nk_r16_type gives. */
Deno.test({
  name: "repacked: the library's repacked type ids are the ones repacked.ts names",
  ignore: !canRepack,
  fn() {
    const ids = [...REPACKED_TYPES.keys()].sort();
    const fromLibrary = ["Q8_0", "Q4_K", "Q6_K"].map((n) => k.repackedType(ggmlTypeByName(n)!.id)!)
      .sort();
    assertEquals(fromLibrary, ids);
    for (const [id, { base }] of REPACKED_TYPES) assertEquals(k.repackedType(base), id);
  },
});

Deno.test({
  name: "repacked: the CPU backend repacks Q8_0, Q4_K and Q6_K at load unless told not to",
  ignore: !canRepack,
  fn() {
    const rng = new Rng(9);
    const cases = [
      { type: "Q8_0", rows: 32, repacked: true },
      { type: "Q4_K", rows: 32, repacked: true },
      { type: "Q6_K", rows: 32, repacked: true },
      // Not a whole number of groups of sixteen, and a type the kernels do not repack.
      { type: "Q8_0", rows: 24, repacked: false },
      { type: "Q5_K", rows: 32, repacked: false },
    ];
    for (const repack of [true, false]) {
      const backend = new CpuBackend({ threads: 1, repack });
      try {
        for (const c of cases) {
          const info = ggmlTypeByName(c.type)!;
          const cols = 256;
          const bytes = randomBlocks(info, (c.rows * cols) / info.blockSize, rng);
          const w = weight(backend.loadWeight({
            name: "w",
            type: info,
            rows: c.rows,
            cols,
            bytes,
            pointer: Deno.UnsafePointer.of(bytes)!,
            transient: true,
          }));
          const want = repack && c.repacked ? k.repackedType(info.id) : info.id;
          assertEquals(w.kernelType, want, `${c.type} x ${c.rows}, repack ${repack}`);
        }
      } finally {
        backend.close();
      }
    }
  },
});

Deno.test({
  name:
    "repacked experts: a stack loaded repacked computes what it does unpacked, few and many rows per expert",
  ignore: !canRepack,
  async fn() {
    const rng = new Rng(77);
    const [rows, cols, experts, top] = [48, 512, 6, 2];
    for (const name of ["Q8_0", "Q4_K", "Q6_K"]) {
      const info = ggmlTypeByName(name)!;
      // A rank's rows of each expert, in place at a stride longer than an expert.
      const rb = rowBytes(info, cols), stride = 2 * rows * rb;
      const bytes = new Uint8Array(stride * experts);
      for (let e = 0; e < experts; e++) {
        bytes.set(randomBlocks(info, (rows * cols) / info.blockSize, rng), e * stride);
      }
      const backend = new CpuBackend({ threads: 1 });
      try {
        const stack = backend.loadExperts({
          name: "ffn_up_exps",
          type: info,
          rows,
          cols,
          experts,
          expertStride: stride,
          bytes,
          pointer: Deno.UnsafePointer.of(bytes)!,
          transient: false,
        }) as CpuExperts;
        assertEquals(stack.kernelType, k.repackedType(info.id), `${name}: kept its layout`);
        // 1 token, a few per expert (row kernel unpacked), and 40 (panels unpacked).
        for (const tokens of [1, 5, 40]) {
          const ids = new Float32Array(tokens * top);
          for (let s = 0; s < ids.length; s++) ids[s] = (s * 5 + (s % top)) % experts;
          const x = randomF32(rng, tokens * cols);
          const want = new Float32Array(tokens * top * rows);
          const plain = { type: info.id, w: bytes, stride, rows, y: want };
          const ref = k.createPool(1);
          ref.matmulExperts([plain], experts, cols, x, tokens, ids, tokens, top);
          ref.destroy();
          await everyPool((pool, what) => {
            const y = new Float32Array(tokens * top * rows).fill(NaN);
            const mat = { type: stack.kernelType, w: stack.pointer, stride: stack.stride, rows, y };
            pool.matmulExperts([mat], experts, cols, x, tokens, ids, tokens, top);
            const e = relError(y, want);
            assert(e <= SAME_TOLERANCE, `${name} ${what} ${tokens} tokens: differs by ${e}`);
          });
        }
      } finally {
        backend.close();
      }
    }
  },
});

Deno.test({
  name: "repacked: a copy the host cannot hold is not made, and the weight keeps its GGUF layout",
  ignore: !canRepack,
  fn() {
    const MiB = 2 ** 20;
    const arena = new WeightArena(k);
    // A new chunk (64 MiB) plus the headroom must fit what the host has available.
    assert(arena.canReserve(MiB, 1024 * MiB));
    assert(!arena.canReserve(MiB, 100 * MiB));

    class FullArena extends WeightArena {
      override canReserve(): boolean {
        return false;
      }
    }
    const rng = new Rng(12);
    const info = ggmlTypeByName("Q4_K")!;
    const [rows, cols] = [32, 256];
    const bytes = randomBlocks(info, (2 * rows * cols) / info.blockSize, rng);
    const source = {
      name: "w",
      type: info,
      rows,
      cols,
      bytes,
      pointer: Deno.UnsafePointer.of(bytes)!,
      transient: false,
    };
    const pool = k.createPool(1);
    try {
      assert(repackWeight(k, pool, new WeightArena(k), source) !== null);
      assertEquals(repackWeight(k, pool, new FullArena(k), source), null);
      const experts = { ...source, experts: 2, expertStride: rows * rowBytes(info, cols) };
      assertEquals(repackExperts(k, pool, new FullArena(k), experts), null);
    } finally {
      pool.destroy();
    }
  },
});
