/**
 * Failure paths on the emulated GPU: a driver that will not initialise, no device, a GPU
 * older than every kernel flavour, too little memory (refused with the numbers, leaving
 * nothing allocated), bad operands and op parameters (typed errors, nothing changed, the
 * backend still usable), and the PTX path for a GPU newer than every cubin.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { CudaError, CudaUnavailableError } from "../../src/backend/cuda/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { fixture } from "../fixtures.ts";
import { Pair, source } from "../gpu/checks/pair.ts";
import type { RopeSpec } from "../../src/backend/backend.ts";
import { checkMatmul } from "../gpu/checks/matmul.ts";
import { ggmlTypeByName } from "../../src/gguf/types.ts";

const emu = await emulator();

function test(name: string, fn: () => void): void {
  Deno.test({
    name: `emulated CUDA: ${name}`,
    ignore: emu === null,
    fn() {
      resetEmulator(emu!);
      try {
        fn();
      } finally {
        resetEmulator(emu!);
      }
    },
  });
}

test("a driver whose cuInit fails is cuda_unavailable with the CUresult name", () => {
  emu!.control.set("init_result", 100);
  const err = assertThrows(() => emu!.backend(), CudaUnavailableError);
  assertMatch(err.message, /cuInit failed: CUDA_ERROR_NO_DEVICE \(100\)/);
});

test("no device is cuda_unavailable", () => {
  emu!.control.set("device_count", 0);
  const err = assertThrows(() => emu!.backend(), CudaUnavailableError);
  assertMatch(err.message, /sees no CUDA device/);
  emu!.control.set("device_count", 1);
  assertMatch(
    assertThrows(() => emu!.backend({ device: 3 }), CudaUnavailableError).message,
    /device 3 does not exist/,
  );
});

test("a compute capability 8.6 GPU is cuda_unavailable naming the flavours", () => {
  emu!.control.set("cc_major", 8);
  emu!.control.set("cc_minor", 6);
  const err = assertThrows(() => emu!.backend(), CudaUnavailableError);
  assertMatch(err.message, /no kernel flavour runs on compute capability 8\.6/);
});

test("exact architectures load cubins; newer ones (10.0) load PTX", () => {
  const hopper = emu!.backend();
  assertEquals([hopper.info().flavour, hopper.info().image], ["sm_90", "cubin"]);
  hopper.close();
  emu!.control.set("cc_major", 10);
  const blackwell = emu!.backend();
  assertEquals([blackwell.info().flavour, blackwell.info().image], ["sm_90", "ptx"]);
  try {
    checkMatmul(new Pair(blackwell), "Q8_0", true);
  } finally {
    blackwell.close();
  }
});

test("a model that does not fit fails with the numbers and leaves nothing allocated", () => {
  emu!.control.set("total_mb", 8);
  const before = emu!.control.stat("allocations");
  const be = emu!.backend();
  const file = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
  try {
    const err = assertThrows(() => readModel(file).load(be), CudaError);
    assertEquals(err.code, "cuda_out_of_memory");
    assertMatch(
      err.message,
      /^out of GPU memory allocating [\d.]+ MiB of weights: [\d.]+ MiB free of 8\.0 MiB, this model holds [\d.]+ MiB$/,
    );
    const fits = assertThrows(() => be.ensureFits(12 * 2 ** 20), CudaError);
    assertMatch(
      fits.message,
      /the model needs 12\.0 MiB of GPU memory \(plus 512\.0 MiB headroom\) but Neuron Emulated GPU 0 has [\d.]+ MiB free of 8\.0 MiB/,
    );
  } finally {
    be.close();
    file.close();
  }
  assertEquals(emu!.control.stat("allocations"), before);
});

test("a KV cache larger than the free memory is refused before allocating", () => {
  const be = emu!.backend();
  try {
    const before = be.memoryUsage().kv;
    const err = assertThrows(
      () =>
        be.createKvCache({
          nLayers: 64,
          nKvHeads: 8,
          headDim: 128,
          blockSize: 16,
          nBlocks: 65536,
          dtype: "f16",
        }),
      CudaError,
    );
    assertEquals(err.code, "cuda_out_of_memory");
    assertMatch(err.message, /^the KV cache needs 262144\.0 MiB of GPU memory/);
    assertEquals(be.memoryUsage().kv, before);
  } finally {
    be.close();
  }
});

test("bad operands are cuda_invalid_argument and the backend keeps working", () => {
  const be = emu!.backend();
  const pair = new Pair(be);
  try {
    const table = pair.randomWeight(ggmlTypeByName("F32")!, 4, 32);
    const out = pair.activation(2, 32);
    const bad = assertThrows(() => be.embed(out.dev, table.dev, Int32Array.of(1, 4)), CudaError);
    assertEquals([bad.code, bad.message], ["cuda_invalid_argument", "embed: token id 4 of 4"]);
    const view = be.rowsOf(out.dev, 1);
    assertEquals(assertThrows(() => be.free(view), CudaError).code, "cuda_invalid_argument");
    const x = pair.random(2, 48);
    assertMatch(
      assertThrows(() => be.matmul(out.dev, table.dev, x.dev), CudaError).message,
      /x has 48 columns/,
    );
    const cache = be.createKvCache({
      nLayers: 1,
      nKvHeads: 1,
      headDim: 32,
      blockSize: 16,
      nBlocks: 2,
      dtype: "f32",
    });
    const k = pair.random(1, 32);
    const layout = {
      positions: Int32Array.of(16),
      sequences: [{ rowStart: 0, rowCount: 1, blockTable: Int32Array.of(1) }],
    };
    assertMatch(
      assertThrows(() => be.storeKv(cache, 0, k.dev, k.dev, layout), CudaError).message,
      /position 16 is beyond sequence 0's block table/,
    );
    const wild = {
      positions: Int32Array.of(0),
      sequences: [{ rowStart: 0, rowCount: 1, blockTable: Int32Array.of(2) }],
    };
    assertMatch(
      assertThrows(() => be.storeKv(cache, 0, k.dev, k.dev, wild), CudaError).message,
      /block 2 is not in the pool/,
    );
    be.free(x.dev);
    assertMatch(assertThrows(() => be.read(x.dev), CudaError).message, /used after free/);
    // Still computing correctly after all that.
    be.embed(out.dev, table.dev, Int32Array.of(3, 0));
    pair.ref.embed(out.ref, table.ref, Int32Array.of(3, 0));
    pair.check("embed after errors", out, 0);
  } finally {
    be.close();
  }
});

test("bad rope specs, windows, biases and scale factors are refused, changing nothing", () => {
  const be = emu!.backend();
  const pair = new Pair(be);
  try {
    const f32 = ggmlTypeByName("F32")!;
    const row = (name: string, values: number[]) =>
      be.loadWeight(
        source(name, f32, 1, values.length, new Uint8Array(Float32Array.from(values).buffer)),
      );
    const x = pair.random(2, 64);
    const before = be.read(x.dev);
    const layout = { positions: Int32Array.of(3, 9), sequences: [] };
    const rope = { style: "norm" as const, base: 1e4, freqScale: 1, freqFactors: null, yarn: null };
    const refused = (spec: RopeSpec, heads = 2, dim = 32): string =>
      assertThrows(() => be.rope(x.dev, layout, heads, dim, spec), CudaError).message;
    assertEquals(refused({ ...rope, freqScale: 0 }), "rope: freqScale 0");
    assertEquals(refused({ ...rope, base: NaN }), "rope: base NaN");
    assertEquals(refused({ ...rope, style: "gptj" as "norm" }), "rope: style gptj");
    assertEquals(refused(rope, 3, 32), "rope: 64 columns as 3 heads of 32");
    const yarn = { extFactor: 1, low: 3, high: 9, mscale: 1.1 };
    assertEquals(refused({ ...rope, yarn: { ...yarn, mscale: 0 } }), "rope: yarn mscale 0");
    assertEquals(
      refused({ ...rope, yarn: { ...yarn, low: NaN } }),
      "rope: yarn ext 1 over pairs NaN..9",
    );
    assertMatch(
      refused({ ...rope, freqFactors: row("short", Array(8).fill(1)) }),
      /freqFactors short is 1x8, not one row of 16/,
    );
    const zero = row("zero", [...Array(15).fill(1), 0]);
    assertMatch(refused({ ...rope, freqFactors: zero }), /zero holds a value that is not above 0/);
    assertEquals(be.read(x.dev), before);
    const cache = be.createKvCache({
      nLayers: 1,
      nKvHeads: 1,
      headDim: 32,
      blockSize: 16,
      nBlocks: 1,
      dtype: "f32",
    });
    const one = { positions: Int32Array.of(0), sequences: [] };
    for (const window of [-1, 2.5]) {
      const shape = { nHeads: 2, nKvHeads: 1, headDim: 32, scale: 1, window };
      assertEquals(
        assertThrows(() => be.attention(x.dev, x.dev, cache, 0, one, shape), CudaError).message,
        `attention: window ${window}`,
      );
    }
    const out = pair.activation(2, 64);
    assertMatch(
      assertThrows(() => be.addBias(out.dev, x.dev, row("bias", Array(32).fill(1))), CudaError)
        .message,
      /addBias: 2x64 \+ bias \(1x32\)/,
    );
    assertEquals(
      assertThrows(() => be.scale(out.dev, x.dev, Infinity), CudaError).message,
      "scale: factor Infinity",
    );
    assertEquals(be.read(x.dev), before);
    // Still computing correctly after all that.
    pair.dev.rope(x.dev, layout, 2, 32, rope);
    pair.ref.rope(x.ref, layout, 2, 32, rope);
    pair.check("rope after errors", x, 1e-5);
  } finally {
    be.close();
  }
});

Deno.test({
  name: "emulated CUDA: device bandwidth is measured with timed device copies",
  ignore: emu === null,
  fn() {
    const be = emu!.backend();
    try {
      const gbs = be.bandwidthGBs(8 << 20);
      assert(Number.isFinite(gbs) && gbs > 0, `bandwidth ${gbs}`);
    } finally {
      be.close();
    }
  },
});
