/**
 * NCCL and the tensor-parallel path on a GPU host (skipped where libcuda or libnccl is
 * missing): a world of one rank joins, passes the sanity check and reduces on the device;
 * one rank on CUDA through the tensor-parallel runner (NCCL group, sanity check, shard
 * load) answers like the plain CUDA runner and like llama.cpp; two ranks do too where the
 * host has two GPUs (NCCL refuses two ranks on one GPU).
 */
import { assert, assertEquals } from "../support/assert.ts";
import { fixture, LOGIT_TOLERANCE, modelGolden } from "../fixtures.ts";
import { CudaDriver } from "../../src/backend/cuda/driver.ts";
import { LocalRunner, openModel } from "../../src/runner/mod.ts";
import { argmax } from "../../src/common/argmax.ts";
import { NcclCommunicator, ncclUniqueId, openNccl } from "../../src/tp/nccl.ts";
import { TpRunner } from "../../src/tp/tp_runner.ts";

function available(): boolean {
  try {
    CudaDriver.open("libcuda.so.1").close();
    openNccl();
    return true;
  } catch {
    return false;
  }
}

const GPU = available();
/** NCCL refuses two ranks on one GPU: the two-rank test needs two. */
const GPUS = GPU ? gpuCount() : 0;

function gpuCount(): number {
  const driver = CudaDriver.open("libcuda.so.1");
  try {
    return driver.deviceCount();
  } finally {
    driver.close();
  }
}
const KV = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };

Deno.test({
  name: "nccl (GPU): one rank joins, passes the sanity check and reduces on the device",
  ignore: !GPU,
  fn() {
    const comm = NcclCommunicator.init(ncclUniqueId(), 0, 1, { device: 0, initTimeoutMs: 60_000 });
    try {
      assertEquals(comm.sanityCheck(), 1);
      comm.barrier();
      assertEquals(comm.deadlineExpired, false);
    } finally {
      comm.close();
    }
  },
});

/** Greedy decoding through `ranks` CUDA ranks equals the plain CUDA runner's, step by step. */
function matchesPlain(ranks: number): void {
  const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
  const tp = TpRunner.open(model, { device: "cuda", threads: 0, tensorParallel: ranks }, KV);
  const plain = LocalRunner.open(model, { device: "cuda", threads: 0 }, KV);
  try {
    assertEquals(tp.device, "cuda");
    const p = modelGolden("qwen3-tiny-q8_0").prompts.find((q) => q.name === "text_fox")!;
    const table = Int32Array.from({ length: KV.nBlocks }, (_, i) => i);
    const step = (ids: number[], start: number) => ({
      ids: Int32Array.from(ids),
      layout: {
        positions: Int32Array.from(ids, (_, i) => start + i),
        sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: table }],
      },
      logitRows: Int32Array.of(ids.length - 1),
    });
    let [a, b] = [tp.forward(step(p.tokens, 0)), plain.forward(step(p.tokens, 0))];
    const greedy = [argmax(a)];
    for (let k = 1; k < p.greedy.length; k++) {
      const s = step([greedy[k - 1]], p.tokens.length + k - 1);
      [a, b] = [tp.forward(s), plain.forward(s)];
      let worst = 0;
      for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
      assert(worst <= LOGIT_TOLERANCE["qwen3-tiny-q8_0"], `step ${k}: differ by ${worst}`);
      greedy.push(argmax(a));
    }
    assertEquals(greedy, p.greedy.map((g) => g.id));
  } finally {
    tp.close();
    plain.close();
    model.file.close();
  }
}

Deno.test({
  name: "tp runner (GPU): one CUDA rank through the tensor-parallel path matches the plain runner",
  ignore: !GPU,
  fn: () => matchesPlain(1),
});

Deno.test({
  name: "tp runner (GPU): two CUDA ranks (NCCL init, sanity all-reduce, sharded steps) match " +
    "the plain runner",
  ignore: GPUS < 2,
  fn: () => matchesPlain(2),
});
