/**
 * Checker for the recorded op list: a transformer layer's ops recorded and run by one
 * flush give bit-identical results to the same ops run one by one, at every level with 1
 * and 2 threads; a failure the kernels detect surfaces at the flush, named after its op,
 * and leaves the list empty and usable; arrays the caller reuses after recording do not
 * change what runs, also when two ops outside a step are given one array; argmaxRows runs
 * what was queued before it; an interrupt word that moved stops the list between ops;
 * copyKvRows, which runs after whatever was recorded, copies a block's first rows; the
 * profile counts every op that ran, by name.
 */

import {
  assert,
  assertEquals,
  assertStringIncludes,
  assertThrows,
} from "../../../tests/support/assert.ts";
import { GgmlType, randomBlocks, Rng } from "../../gguf/mod.ts";
import { CpuBackend } from "./cpu_backend.ts";
import { CpuKernelError } from "./errors.ts";
import {
  type CpuKernels,
  KV_F16,
  type KvLayout,
  type NativeBuffer,
  ROPE_NEOX,
  type RopeAngles,
} from "./kernels.ts";
import type { OpList } from "./op_list.ts";
import { everyPool, randomF32, testKernels } from "../../../tests/support/cpu_kernels.ts";

type Ops = Pick<
  OpList,
  | "getRows"
  | "rmsnorm"
  | "matmulMany"
  | "matmul"
  | "rope"
  | "kvStore"
  | "attention"
  | "siluMul"
  | "add"
>;

const DIM = 256, HEADS = 4, KV_HEADS = 2, HEAD_DIM = 64, FF = 512, VOCAB = 16;
const ROPE: RopeAngles = {
  freqBase: 10000,
  freqScale: 1,
  freqFactors: null,
  mode: ROPE_NEOX,
  yarn: null,
};
const LAYOUT: KvLayout = {
  type: KV_F16,
  nBlocks: 4,
  blockSize: 4,
  nKvHeads: KV_HEADS,
  headDim: HEAD_DIM,
};

interface Inputs {
  table: Uint8Array;
  norm: Float32Array;
  wq: Uint8Array;
  wk: Uint8Array;
  wv: Uint8Array;
  wo: Uint8Array;
  wGate: Uint8Array;
  wUp: Uint8Array;
}

function inputs(rng: Rng): Inputs {
  const q8 = (rows: number, cols: number): Uint8Array =>
    randomBlocks(GgmlType.Q8_0, (rows * cols) / 32, rng);
  const q4k = (rows: number, cols: number): Uint8Array =>
    randomBlocks(GgmlType.Q4_K, (rows * cols) / 256, rng);
  return {
    table: q8(VOCAB, DIM),
    norm: randomF32(rng, DIM),
    wq: q4k(HEADS * HEAD_DIM, DIM),
    wk: q8(KV_HEADS * HEAD_DIM, DIM),
    wv: q8(KV_HEADS * HEAD_DIM, DIM),
    wo: q8(DIM, HEADS * HEAD_DIM),
    wGate: q4k(FF, DIM),
    wUp: q8(FF, DIM),
  };
}

/** Runs one layer of two tokens through `ops`; returns every buffer it wrote. */
function layer(k: CpuKernels, ops: Ops, w: Inputs, done: () => void): NativeBuffer[] {
  const n = 2;
  const buf = (cols: number): NativeBuffer => k.alloc(n * cols * 4);
  const [x, xn, q, kk, v, attn, proj, gate, up] = [DIM, DIM, DIM, 128, 128, DIM, DIM, FF, FF]
    .map(buf);
  const kCache = k.alloc(4 * 4 * 128 * 2), vCache = k.alloc(4 * 4 * 128 * 2);
  const ids = Int32Array.of(3, 11), positions = Int32Array.of(4, 5), blocks = Int32Array.of(2, 0);
  const seq = { rowStart: 0, rowCount: n, blockTable: blocks };
  ops.getRows(GgmlType.Q8_0, w.table, VOCAB, DIM, ids, x);
  ops.rmsnorm(xn, x, w.norm, n, DIM, 1e-6);
  ops.matmulMany(
    [
      { type: GgmlType.Q4_K, w: w.wq, rows: DIM, y: q },
      { type: GgmlType.Q8_0, w: w.wk, rows: 128, y: kk },
      { type: GgmlType.Q8_0, w: w.wv, rows: 128, y: v },
    ],
    DIM,
    xn,
    n,
  );
  ops.rmsnorm(q, q, null, n * HEADS, HEAD_DIM, 1e-6);
  ops.rope(q, n, HEADS, HEAD_DIM, positions, ROPE);
  ops.rope(kk, n, KV_HEADS, HEAD_DIM, positions, ROPE);
  ops.kvStore(LAYOUT, kCache, vCache, [seq], positions, kk, v);
  ops.attention(LAYOUT, attn, q, kCache, vCache, [seq], positions, HEADS, 0.125);
  ops.matmul(GgmlType.Q8_0, w.wo, DIM, DIM, attn, n, proj);
  ops.add(x, x, proj, n * DIM);
  ops.matmulMany(
    [
      { type: GgmlType.Q4_K, w: w.wGate, rows: FF, y: gate },
      { type: GgmlType.Q8_0, w: w.wUp, rows: FF, y: up },
    ],
    DIM,
    x,
    n,
  );
  ops.siluMul(gate, gate, up, n * FF);
  // The recorded ops hold copies of these: scribbling on them must change nothing.
  ids.fill(0);
  positions.fill(0);
  blocks.fill(1);
  done();
  return [x, xn, q, kk, v, attn, proj, gate, up, kCache, vCache];
}

Deno.test("recorded ops run by one flush match the same ops run one by one, bit for bit", async () => {
  const rng = new Rng(41);
  const w = inputs(rng);
  await everyPool((pool, what, k) => {
    const now = layer(k, pool, w, () => {});
    const later = layer(k, pool.queue, w, () => {
      assertEquals(pool.queue.pending, 12, what);
      pool.queue.flush();
    });
    assertEquals(pool.queue.pending, 0);
    now.forEach((b, i) => {
      assert(b.u8().some((v) => v !== 0), `${what}: buffer ${i} was written`);
      assertEquals(later[i].u8(), b.u8(), `${what}: buffer ${i}`);
      b.free();
      later[i].free();
    });
  });
});

Deno.test("a kernel's refusal surfaces at the flush and leaves the list empty", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  const x = k.alloc(64 * 4), y = k.alloc(64 * 4);
  x.f32().fill(2);
  pool.queue.add(y, x, x, 64);
  // A negative epsilon is only refused by the kernel.
  pool.queue.rmsnorm(y, x, null, 1, 64, -1);
  pool.queue.add(x, x, x, 64);
  const err = assertThrows(() => pool.queue.flush(), CpuKernelError);
  assertEquals(err.code, "cpu_kernel_invalid");
  assertStringIncludes(err.message, "rmsnorm");
  assertEquals(pool.queue.pending, 0);
  // The op before the failed one ran; the one after it did not.
  assertEquals(y.f32()[0], 4);
  assertEquals(x.f32()[0], 2);
  // Argument checks still throw at record time and record nothing.
  assertThrows(() => pool.queue.add(y, x, x, 65), CpuKernelError);
  assertEquals(pool.queue.pending, 0);
  pool.queue.add(x, x, x, 64);
  pool.queue.flush();
  assertEquals(x.f32()[0], 4);
  pool.destroy();
  x.free();
  y.free();
});

Deno.test("the backend's synchronize runs what a step recorded, with nothing read back", async () => {
  await testKernels();
  const be = new CpuBackend({ threads: 2 });
  try {
    const a = be.activation(4, 8);
    be.add(a, a, a);
    be.add(a, a, a);
    // A prefill chunk reads no logits: without this the step would only have been recorded.
    assertEquals(be.pool.queue.pending, 2);
    be.synchronize();
    assertEquals(be.pool.queue.pending, 0);
  } finally {
    be.close();
  }
});

Deno.test("argmaxRows runs the ops queued before it, in the same flush", async () => {
  await testKernels();
  const be = new CpuBackend({ threads: 2 });
  try {
    const a = be.activation(3, 1000), b = be.activation(3, 1000);
    const values = new Float32Array(3000).map((_, i) => Math.sin(i * 0.37) * (i % 7));
    (a as unknown as { buffer: NativeBuffer }).buffer.f32().set(values);
    be.add(b, a, a);
    assertEquals(be.pool.queue.pending, 1);
    const picks = be.argmaxRows(b);
    assertEquals(be.pool.queue.pending, 0);
    const expected = [0, 1, 2].map((r) => {
      const row = values.subarray(r * 1000, (r + 1) * 1000);
      return row.indexOf(Math.max(...row));
    });
    assertEquals([...picks], expected);
    assertEquals(be.argmaxRows(be.rowsOf(b, 0)).length, 0);
  } finally {
    be.close();
  }
});

Deno.test("a profile counts each op that ran by name with its time, and nothing when off", async () => {
  const rng = new Rng(43);
  const w = inputs(rng);
  const k = await testKernels();
  const pool = k.createPool(2);
  const q = pool.queue;
  q.profileOps(true);
  let wall = 0;
  const bufs = layer(k, q, w, () => {
    const t0 = performance.now();
    q.flush();
    wall = performance.now() - t0;
  });
  const profile = q.takeOpProfile();
  // Milliseconds, measured inside the flush: all of them within its wall time (1 ms for
  // the clock's resolution), where nanoseconds read as milliseconds would be thousands.
  const total = profile.reduce((a, t) => a + t.ms, 0);
  assert(total > 0 && total <= wall + 1, `ops ${total} ms in a flush of ${wall} ms`);
  const calls = Object.fromEntries(profile.map((t) => [t.op, t.calls]));
  assertEquals(calls, {
    getRows: 1,
    rmsnorm: 2,
    matmulMany: 2,
    rope: 2,
    kvStore: 1,
    attention: 1,
    matmul: 1,
    add: 1,
    siluMul: 1,
  });
  assertEquals(q.takeOpProfile(), [], "taking the profile clears it");
  // A failing op ran and counts; the op after it did not run and does not.
  const [x, y] = bufs;
  q.add(y, x, x, 64);
  q.rmsnorm(y, x, null, 1, 64, -1);
  q.siluMul(y, x, x, 64);
  assertThrows(() => q.flush(), CpuKernelError);
  const after = q.takeOpProfile();
  assertEquals(after.map((t) => [t.op, t.calls]), [["add", 1], ["rmsnorm", 1]]);
  q.profileOps(false);
  layer(k, q, w, () => q.flush()).forEach((b) => b.free());
  assertEquals(q.takeOpProfile(), []);
  pool.destroy();
  bufs.forEach((b) => b.free());
});

Deno.test("ops recorded outside a step each copy the integers they were given", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  const [a, b, c] = [0, 1, 2].map(() => k.alloc(HEAD_DIM * 4));
  for (const x of [a, b, c]) x.f32().fill(1);
  const positions = Int32Array.of(3);
  pool.queue.rope(a, 1, 1, HEAD_DIM, positions, ROPE);
  positions[0] = 9;
  pool.queue.rope(b, 1, 1, HEAD_DIM, positions, ROPE);
  pool.queue.flush();
  pool.rope(c, 1, 1, HEAD_DIM, Int32Array.of(3), ROPE);
  assertEquals(a.u8(), c.u8(), "the first op rotates by the position it was given");
  assert(b.f32().some((v, i) => v !== a.f32()[i]), "the second op by its own");
  pool.destroy();
  for (const x of [a, b, c]) x.free();
});

Deno.test("an interrupt word that moved stops the list before its next op", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  const x = k.alloc(64 * 4);
  const word = new Int32Array(new SharedArrayBuffer(4));
  const doubleTwice = (seen: number): boolean => {
    x.f32().fill(1);
    pool.queue.add(x, x, x, 64);
    pool.queue.add(x, x, x, 64);
    return pool.queue.flush({ word, seen });
  };
  assert(doubleTwice(0), "an unchanged word lets the list run");
  assertEquals(x.f32()[63], 4);
  word[0] = 1;
  assertEquals(doubleTwice(0), false);
  assertEquals(pool.queue.pending, 0, "the stopped list is emptied");
  assertEquals(x.f32()[63], 1, "no op ran");
  assert(doubleTwice(1), "a word equal to what was seen lets the list run");
  assertEquals(x.f32()[63], 4);
  pool.destroy();
  x.free();
});

Deno.test("copyKvRows copies a block's first rows in every layer and refuses bad blocks", async () => {
  await testKernels();
  const be = new CpuBackend({ threads: 1 });
  try {
    const cache = be.createKvCache({
      nLayers: 2,
      nKvHeads: 2,
      headDim: 4,
      nBlocks: 3,
      blockSize: 4,
      dtype: "f32",
    });
    const { k, v } = cache as unknown as { k: NativeBuffer[]; v: NativeBuffer[] };
    const rowFloats = 2 * 4, blockFloats = 4 * rowFloats;
    for (const b of [...k, ...v]) b.f32().forEach((_, i, a) => (a[i] = i));
    be.copyKvRows(cache, 0, 2, 3);
    for (const b of [...k, ...v]) {
      const f = b.f32();
      for (let i = 0; i < blockFloats; i++) {
        assertEquals(f[2 * blockFloats + i], i < 3 * rowFloats ? i : 2 * blockFloats + i);
      }
    }
    assertThrows(() => be.copyKvRows(cache, 0, 3, 1), CpuKernelError);
    assertThrows(() => be.copyKvRows(cache, 0, 1, 5), CpuKernelError);
  } finally {
    be.close();
  }
});
