/**
 * Every CUDA kernel path against the reference backend, on the emulated GPU: the same
 * kernels (compiled for the CPU) and the same backend code that run on a real one.
 */

import { assertEquals } from "../support/assert.ts";
import { emulator, fusionRuns } from "./support.ts";
import { Pair } from "../gpu/checks/pair.ts";
import { checkMatmul, MATMUL_TYPES } from "../gpu/checks/matmul.ts";
import {
  checkArgmax,
  checkElementwise,
  checkGatherAndEmbed,
  checkHadamard,
  checkMaskedArgmax,
  checkRmsNorm,
} from "../gpu/checks/ops.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { checkNormRope, checkRope, ROPE_CASES } from "../gpu/checks/rope.ts";
import { checkAttention, checkWindowedAttention } from "../gpu/checks/attention.ts";

const emu = await emulator();

function test(name: string, fn: (pair: Pair) => void, options = {}): void {
  Deno.test({
    name,
    ignore: emu === null,
    fn() {
      const be = emu!.backend(options);
      try {
        fn(new Pair(be));
      } finally {
        be.close();
      }
    },
  });
}

for (const type of MATMUL_TYPES) {
  test(`emulated CUDA: matmul ${type} (mat-vec, chunked and cuBLAS paths)`, (p) => {
    checkMatmul(p, type, true);
  });
}

test("emulated CUDA: matmul without cuBLAS (prefill on the mat-vec kernels)", (p) => {
  for (const type of ["Q4_K", "F16", "Q8_0"] as const) checkMatmul(p, type, false);
}, { cublas: false });

test("emulated CUDA: rmsNorm, siluMul, geluMul, add, addBias, scale", (p) => {
  checkRmsNorm(p);
  checkElementwise(p);
});

Deno.test({
  name: "emulated CUDA: hadamard matches the reference's product and the CPU's bits",
  ignore: emu === null,
  fn() {
    const be = emu!.backend();
    const cpu = new CpuBackend({ threads: 2 });
    try {
      checkHadamard(new Pair(be));
      checkHadamard(new Pair(be, 1, cpu), 0);
    } finally {
      be.close();
      cpu.close();
    }
  },
});

test("emulated CUDA: rope in both layouts, with scaling and frequency factors", (p) => {
  checkRope(p);
});

Deno.test({
  name: "emulated CUDA: per-head norms then rope, fused in every rope mode, equal the " +
    "plain kernels bitwise in half the launches",
  ignore: emu === null,
  fn() {
    const runs = fusionRuns(emu!, (be) => checkNormRope(new Pair(be)));
    runs[1].outs.forEach((o, i) => assertEquals(Array.from(o), Array.from(runs[0].outs[i])));
    // Each case's two norms and two ropes launch as two kernels.
    assertEquals(runs[0].launches - runs[1].launches, 2 * ROPE_CASES.length);
  },
});

test("emulated CUDA: gatherRows, embed from every table type, argmaxRows", (p) => {
  checkGatherAndEmbed(p);
  checkArgmax(p);
});

Deno.test({
  name: "emulated CUDA: argmaxRows under token masks equals the CPU backend's",
  ignore: emu === null,
  fn() {
    const be = emu!.backend();
    const cpu = new CpuBackend({ threads: 2 });
    try {
      checkMaskedArgmax(new Pair(be, 1, cpu));
    } finally {
      cpu.close();
      be.close();
    }
  },
});

test("emulated CUDA: storeKv and attention (GQA, paged, f32, f16, q8_0 and q4_0 caches)", (p) => {
  checkAttention(p);
});

test("emulated CUDA: sliding-window attention, prefill and decode kernels", (p) => {
  checkWindowedAttention(p);
});

test("emulated CUDA: allReduce runs the collective on the backend's stream, in step order", (p) => {
  const x = p.random(3, 40);
  const y = p.activation(3, 40);
  const calls: Array<{ count: number; dtype: string; stream: boolean }> = [];
  // The emulated device's memory is host memory: a two-rank sum of equal halves doubles.
  // The collective runs here, on the host, at the call: the queued work before it runs
  // first, as the stream would order it.
  const group = {
    rank: 0,
    size: 2,
    allReduceSum(address: bigint, count: number, dtype: string, stream: Deno.PointerValue) {
      calls.push({ count, dtype, stream: stream !== null });
      assertEquals(emu!.control.drain(), 0);
      const view = new Float32Array(
        Deno.UnsafePointerView.getArrayBuffer(Deno.UnsafePointer.create(address)!, count * 4),
      );
      for (let i = 0; i < count; i++) view[i] *= 2;
    },
  };
  p.dev.add(y.dev, x.dev, x.dev);
  p.dev.allReduce!(y.dev, group);
  p.dev.add(y.dev, y.dev, x.dev);
  p.ref.add(y.ref, x.ref, x.ref);
  p.ref.add(y.ref, y.ref, y.ref);
  p.ref.add(y.ref, y.ref, x.ref);
  p.check("add, allReduce, add", y, 0);
  assertEquals(calls, [{ count: 120, dtype: "f32", stream: true }]);
});
