/**
 * The q8_0 and q4_0 KV caches on the emulated GPU against the native CPU backend: kv_store
 * leaves every byte of the cache as the CPU's (ggml's reference quantizers, rounding and
 * tie-breaking included), attention over such a cache (tiled prefill, split decode) gives
 * the CPU's outputs, a Qwen3 fixture greedy-decodes to the CPU's tokens and logits, and
 * copied rows of a quantized cache serve as the rows in place.
 */

import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { buildCpuKernels } from "../../kernels/build_cpu.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import type { CudaKvCache } from "../../src/backend/cuda/resources.ts";
import { type CudaBackend, CudaError } from "../../src/backend/cuda/mod.ts";
import type { Backend, KvCache, KvDType, StepLayout } from "../../src/backend/backend.ts";
import { kvLayerBytes } from "../../src/backend/backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { type Both, Pair, randomF32 } from "../gpu/checks/pair.ts";
import { checkAttention, checkWindowedAttention } from "../gpu/checks/attention.ts";
import { checkCopiedRows, Decoder, smallModel } from "../gpu/checks/model.ts";
import { fixture, LOGIT_TOLERANCE, modelGolden } from "../fixtures.ts";

const emu = await emulator();
if (emu) await buildCpuKernels();

const QUANTIZED: readonly KvDType[] = ["q8_0", "q4_0"];

/** Runs `fn` on an emulated GPU and a CPU backend, both closed afterwards. */
function withBoth<T>(fn: (cuda: CudaBackend, cpu: CpuBackend) => T): T {
  resetEmulator(emu!);
  const cuda = emu!.backend();
  const cpu = new CpuBackend({ threads: 1 });
  try {
    return fn(cuda, cpu);
  } finally {
    cuda.close();
    cpu.close();
  }
}

/** A layer's K or V as the cache holds it, after the work recorded so far. */
function cacheBytes(be: Backend, cache: KvCache, layer: number, which: "k" | "v"): Uint8Array {
  const bytes = kvLayerBytes(cache.spec);
  be.synchronize();
  if (be instanceof CpuBackend) {
    // The CPU cache's per-layer native buffers (cpu_backend.ts CpuKvCache).
    const host = cache as unknown as Record<"k" | "v", Array<{ u8(): Uint8Array }>>;
    return host[which][layer].u8().slice(0, bytes);
  }
  // The emulated device's memory is host memory.
  const address = (cache as CudaKvCache)[which][layer];
  const view = Deno.UnsafePointerView.getArrayBuffer(
    Deno.UnsafePointer.create(BigInt(address))!,
    bytes,
  );
  return new Uint8Array(view).slice();
}

/**
 * K or V rows: normal values, and in row r's blocks the cases rounding and tie-breaking
 * decide: exact halves on the quantized grid (d = 1: q8_0 rounds them away from zero, q4_0
 * truncates x + 8.5), largest magnitudes shared by both signs (the first one sets q4_0's
 * sign), all zeros, negative zeros, tiny and large scales.
 */
function rowsWithEdges(pair: Pair, rows: number, cols: number): Float32Array {
  const x = randomF32(pair.rng, rows * cols);
  const edges: Array<(b: Float32Array) => void> = [
    (b) => b.set([127, -0.5, 0.5, 2.5, -2.5, 126.5, -126.5, 0.49999997, 1.5, -1.5]),
    (b) => b.set([-8, -0.5, 0.5, 1.5, -1.5, 7.5, -7.5, 6.4999995, -3.5, 3.5]),
    (b) => (b.fill(0.25), b[5] = 3, b[9] = -3),
    (b) => (b.fill(-0.25), b[2] = -3, b[30] = 3),
    (b) => b.fill(0),
    (b) => b.fill(-0),
    (b) => b.forEach((_, i) => (b[i] *= 1e-6)),
    (b) => b.forEach((_, i) => (b[i] *= 3000)),
  ];
  for (let r = 0; r < rows; r++) {
    for (let blk = 0; blk < cols / 32; blk++) {
      const edge = edges[(r + 3 * blk) % (edges.length + 2)];
      edge?.(x.subarray(r * cols + 32 * blk, r * cols + 32 * blk + 32));
    }
  }
  return x;
}

/** Three sequences over shuffled blocks (21 rows from position 0, 5 from 9, 1 at 40) and
 * a stray row of no sequence. */
const LAYOUT: StepLayout = {
  positions: Int32Array.from([...Array(21).keys(), ...[9, 10, 11, 12, 13], 40, 3]),
  sequences: [
    { rowStart: 0, rowCount: 21, blockTable: Int32Array.from([7, 2, 9]) },
    { rowStart: 21, rowCount: 5, blockTable: Int32Array.from([4, 0]) },
    { rowStart: 26, rowCount: 1, blockTable: Int32Array.from([11, 1, 10]) },
  ],
};

for (const dtype of QUANTIZED) {
  Deno.test({
    name: `emulated CUDA: a ${dtype} storeKv writes the CPU backend's bytes, every one`,
    ignore: emu === null,
    fn() {
      withBoth((cuda, cpu) => {
        const pair = new Pair(cuda, 3, cpu);
        for (const headDim of [64, 128]) {
          const spec = { nLayers: 2, nKvHeads: 2, headDim, blockSize: 16, nBlocks: 12, dtype };
          const cache: Both<KvCache> = {
            dev: cuda.createKvCache(spec),
            ref: cpu.createKvCache(spec),
          };
          const rows = LAYOUT.positions.length, cols = spec.nKvHeads * headDim;
          const k = pair.upload(rowsWithEdges(pair, rows, cols), rows, cols);
          const v = pair.upload(rowsWithEdges(pair, rows, cols), rows, cols);
          cuda.storeKv(cache.dev, 1, k.dev, v.dev, LAYOUT);
          cpu.storeKv(cache.ref, 1, k.ref, v.ref, LAYOUT);
          for (const layer of [0, 1]) {
            for (const which of ["k", "v"] as const) {
              const got = cacheBytes(cuda, cache.dev, layer, which);
              const want = cacheBytes(cpu, cache.ref, layer, which);
              const at = got.findIndex((b, i) => b !== want[i]);
              assert(at === -1, `head ${headDim} layer ${layer} ${which}: byte ${at} differs`);
              // Layer 0 was never written; layer 1 was.
              assertEquals(want.some((b) => b !== 0), layer === 1);
            }
          }
        }
      });
    },
  });
}

Deno.test({
  name: "emulated CUDA: attention over q8_0 and q4_0 caches equals the CPU backend's " +
    "(prefill and decode, GQA, shuffled blocks, sliding windows)",
  ignore: emu === null,
  fn() {
    withBoth((cuda, cpu) => {
      checkAttention(new Pair(cuda, 5, cpu), QUANTIZED);
      checkWindowedAttention(new Pair(cuda, 6, cpu), QUANTIZED);
    });
  },
});

Deno.test({
  name: "emulated CUDA: qwen3-tiny-q8_0 greedy-decodes with a q8_0 KV cache to the CPU " +
    "backend's tokens and logits",
  ignore: emu === null,
  fn() {
    const name = "qwen3-tiny-q8_0";
    const prompt = modelGolden(name).prompts.find((p) => p.name === "raw_repeat")!;
    const steps = 6;
    const table = Int32Array.from([5, 2, 7]);
    const run = (be: Backend): { ids: number[]; logits: Float32Array[] } => {
      const d = new Decoder(fixture(`${name}.gguf`), be, "q8_0");
      try {
        const logits = [be.read(d.step([prompt.tokens], [0], [table]))];
        const ids = [argmax(logits[0])];
        for (let k = 1; k < steps; k++) {
          logits.push(be.read(d.step([[ids[k - 1]]], [prompt.tokens.length + k - 1], [table])));
          ids.push(argmax(logits[k]));
        }
        return { ids, logits };
      } finally {
        d.close();
      }
    };
    const [gpu, host] = withBoth((cuda, cpu) => [run(cuda), run(cpu)]);
    assertEquals(gpu.ids, host.ids, "greedy tokens");
    // A q8_0 cache does not move this fixture's choices off llama.cpp's (f16 cache).
    assertEquals(host.ids, prompt.greedy.slice(0, steps).map((g) => g.id), "llama.cpp's tokens");
    host.logits.forEach((want, k) => {
      const top = Array.from(want.keys()).sort((a, b) => want[b] - want[a]).slice(0, 20);
      const d = Math.max(...top.map((id) => Math.abs(gpu.logits[k][id] - want[id])));
      assert(d <= LOGIT_TOLERANCE[name], `step ${k}: top-20 logits differ by ${d}`);
    });
  },
});

Deno.test({
  name: "emulated CUDA: rows of a quantized cache copied between blocks serve as the rows " +
    "in place",
  ignore: emu === null,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = smallModel(dir, "q8_0");
      for (const dtype of QUANTIZED) {
        resetEmulator(emu!);
        const be = emu!.backend();
        const d = new Decoder(path, be, dtype);
        try {
          checkCopiedRows(d);
        } finally {
          d.close();
          be.close();
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "emulated CUDA: a quantized cache whose heads are not whole blocks, or a type the " +
    "backend has no kernels for, is refused with nothing allocated",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    const be = emu!.backend();
    try {
      const before = emu!.control.stat("allocations");
      const spec = { nLayers: 2, nKvHeads: 2, headDim: 48, blockSize: 16, nBlocks: 4 };
      for (const dtype of QUANTIZED) {
        const err = assertThrows(() => be.createKvCache({ ...spec, dtype }), CudaError);
        assertEquals(
          [err.code, err.message],
          [
            "cuda_invalid_argument",
            `createKvCache: a ${dtype} KV cache needs a head dimension divisible by 32, got 48`,
          ],
        );
      }
      const dtype = "q5_0" as KvDType;
      const err = assertThrows(() => be.createKvCache({ ...spec, headDim: 64, dtype }), CudaError);
      assertEquals(err.message, `createKvCache: unknown KV cache type "q5_0"`);
      assertEquals(emu!.control.stat("allocations"), before);
    } finally {
      be.close();
    }
  },
});
