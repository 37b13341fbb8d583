/**
 * Launch planning in TypeScript, where a mistake would only show on a GPU: kernel and
 * thread choices per type and width, attention splits that never depend on positions,
 * block-table strides, the pool's size classes, and the tape's word records.
 */

import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { ggmlTypeByName } from "../../src/gguf/types.ts";
import { DEQUANTIZABLE_TYPES } from "../../src/gguf/mod.ts";
import {
  expertsTiled,
  matvecPlan,
  paddedCols,
  supportedType,
  threadsPerRow,
  tokensInstance,
} from "../../src/backend/cuda/matmul_plan.ts";
import { attentionSplits, tableStride } from "../../src/backend/cuda/ops_attention.ts";
import { pooledSize } from "../../src/backend/cuda/memory.ts";
import { HEADER_WORDS, LAUNCH, sameWords, Tape, tapeHash } from "../../src/backend/cuda/tape.ts";
import { type Kernel, paramLayout } from "../../src/backend/cuda/kernels.ts";
import { CudaError } from "../../src/backend/cuda/errors.ts";

const t = (name: string) => ggmlTypeByName(name)!;

Deno.test("matmul plans: q8_1 units for quantized types, 8-wide floats, generic otherwise", () => {
  assertEquals(matvecPlan(t("Q4_K"), 4096), { kind: "q8", name: "q4_k", unitValues: 64 });
  assertEquals(matvecPlan(t("Q5_K"), 4096), { kind: "q8", name: "q5_k", unitValues: 64 });
  assertEquals(matvecPlan(t("Q6_K"), 4096), { kind: "q8", name: "q6_k", unitValues: 32 });
  assertEquals(matvecPlan(t("Q8_0"), 1024), { kind: "q8", name: "q8_0", unitValues: 32 });
  assertEquals(matvecPlan(t("BF16"), 64), { kind: "float", name: "bf16", unitValues: 8 });
  assertEquals(matvecPlan(t("F16"), 36), { kind: "any" });
  for (const { name } of DEQUANTIZABLE_TYPES) {
    assert(supportedType(t(name)), name);
  }
  for (const name of ["IQ4_XS", "Q8_K", "I32", "F64"]) assert(!supportedType(t(name)), name);
});

Deno.test("expert products: tiled from 8 slots per expert on average, for q8_1 units but Q2_K", () => {
  const plan = (name: string) => matvecPlan(t(name), 2048);
  // qwen3-30b-a3b (128 experts, top 8): a 512-token prefill tiles, 16 decoding streams not.
  assert(expertsTiled(plan("Q4_K"), 512 * 8, 128));
  assert(expertsTiled(plan("Q6_K"), 128 * 8, 128));
  assert(!expertsTiled(plan("Q4_K"), 16 * 8, 128));
  assert(!expertsTiled(plan("Q4_K"), 127 * 8, 128));
  assert(!expertsTiled(plan("Q2_K"), 512 * 8, 128));
  assert(!expertsTiled(plan("F16"), 512 * 8, 128));
});

Deno.test("threads per row, token instances and padding", () => {
  assertEquals([16, 32, 127, 128, 255, 256, 4096].map(threadsPerRow), [
    32,
    32,
    32,
    64,
    64,
    128,
    128,
  ]);
  assertEquals([1, 2, 3, 4, 5, 8].map(tokensInstance), [1, 4, 4, 4, 8, 8]);
  assertEquals([1, 256, 257, 1024, 12288].map(paddedCols), [256, 256, 512, 1024, 12288]);
});

Deno.test("attention splits depend on shapes only and fill the GPU", () => {
  // One decode row, 16 head blocks on 132 SMs: 17 splits unless the cache is short.
  assertEquals(attentionSplits(1, 16, 65536, 132), 17);
  // Qwen3-8B on an H200: 8 KV heads (each block serving its 4 query heads), 4k and 16k.
  assertEquals(attentionSplits(1, 8, 4096, 132), 33);
  assertEquals(attentionSplits(1, 8, 16384, 132), 33);
  // A short cache: one 32-position tile per split at the least.
  assertEquals(attentionSplits(1, 16, 256, 132), 8);
  assertEquals(attentionSplits(1, 8, 512, 132), 16);
  assertEquals(attentionSplits(1, 1, 1 << 20, 132), 64);
  assertEquals(attentionSplits(512, 32, 4096, 132), 1);
  assertEquals([1, 16, 17, 100, 2560].map(tableStride), [16, 16, 32, 128, 4096]);
});

Deno.test("pooled sizes round up by at most an eighth", () => {
  assertEquals([1, 256, 257, 4096].map(pooledSize), [256, 256, 512, 4096]);
  assertEquals(pooledSize(4097), 4608);
  for (const n of [5000, 123457, 9_999_999, 600_000_000]) {
    const p = pooledSize(n);
    assert(p >= n && p <= n * 1.125, `${n} -> ${p}`);
  }
});

function kernel(index: number, name: string, sig: string): Kernel {
  const { offsets, words } = paramLayout(sig);
  return { index, name, sig, offsets: Int32Array.from(offsets), words, fn: null, params: null };
}

Deno.test("tape: launch records hold grid, block and parameter words at the staging offsets", () => {
  const k = kernel(3, "k", "pif");
  const tape = new Tape();
  tape.launch(k, 5, 2, 1, 128).p(0x1_0000_0040).i(-2).f(1.5).end();
  const w = Array.from(tape.words.subarray(0, tape.length));
  const f = new Uint32Array(new Float32Array([1.5]).buffer)[0];
  assertEquals(w, [LAUNCH, 3, 5, 2, 1, 128, 4, 0x40, 1, 0xfffffffe, f]);
  assertEquals(tape.length, HEADER_WORDS + 4);
  assert(tape.launchesOnly);
  tape.hostCall(() => {});
  assert(!tape.launchesOnly);
});

Deno.test("tape: an optional pointer is NULL as 0, else written as a pointer", () => {
  const k = kernel(1, "k", "pp");
  const tape = new Tape();
  tape.launch(k, 1, 1, 1, 32).opt(0).opt(0x2_0000_0080).end();
  assertEquals(
    Array.from(tape.words.subarray(HEADER_WORDS, tape.length)),
    [0, 0, 0x80, 2],
  );
});

Deno.test("tape: equal steps give equal words; any parameter difference changes them", () => {
  const k = kernel(0, "k", "ppi");
  const record = (n: number, p: number): Tape => {
    const tape = new Tape();
    tape.launch(k, 1, 1, 1, 32).p(4096).p(p).i(n).end();
    return tape;
  };
  const [a, b, c] = [record(7, 8192), record(7, 8192), record(8, 8192)];
  assertEquals(tapeHash(a.words, a.length), tapeHash(b.words, b.length));
  assert(sameWords(a.words, b.words, a.length));
  assert(!sameWords(a.words, c.words, a.length));
});

Deno.test("tape: wrong parameter kinds or counts, bad pointers and grids are refused", () => {
  const k = kernel(0, "k", "pi");
  const tape = new Tape();
  assertThrows(() => tape.launch(k, 1, 1, 1, 32).i(1), CudaError);
  const t2 = new Tape();
  assertThrows(() => t2.launch(k, 1, 1, 1, 32).p(64).end(), CudaError);
  assertThrows(() => new Tape().launch(k, 1, 1, 1, 32).p(0), CudaError);
  assertThrows(() => new Tape().launch(k, 1, 1, 1, 32).opt(-64), CudaError);
  assertThrows(() => new Tape().launch(k, 1, 1, 1, 32).opt(0).opt(0), CudaError);
  assertThrows(() => new Tape().launch(k, 1, 70000, 1, 32), CudaError);
  assertThrows(() => new Tape().launch(k, 0, 1, 1, 32), CudaError);
});
