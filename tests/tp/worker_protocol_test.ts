/**
 * `neuron --worker` as its leader drives it, this test being rank 0: every op of WIRE.md's
 * worker protocol with its success reply and its error kinds, bad lines, unknown ops, a
 * step run in lockstep with this process, `shutdown` and end of input (both exit 0), and
 * the command line's usage errors.
 */
import { assertEquals, assertMatch } from "../support/assert.ts";
import { runNeuron } from "../support/processes.ts";
import { fixture } from "../fixtures.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { openModel } from "../../src/runner/mod.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { commIdToHex } from "../../src/tp/comm_id.ts";
import { CpuCommunicator, newCpuCommId } from "../../src/tp/cpu_comm.ts";
import { workerCommand } from "../../src/tp/worker_command.ts";
import { WorkerProcess } from "../../src/tp/worker_process.ts";
import { stepRequest } from "../../src/tp/step_message.ts";
import type { StepLayout } from "../../src/backend/backend.ts";

const TINY = fixture("qwen3-tiny-q8_0.gguf");
const KV = { blockSize: 16, nBlocks: 8, dtype: "f16" as const };

class Leader {
  readonly w = WorkerProcess.spawn(workerCommand(1, 2, 0), 1);

  /** Sends one line (a request, or anything) and returns the parsed reply. */
  ask(request: unknown, during?: () => void): Record<string, unknown> {
    if (typeof request === "string") this.w.sendLine(request, 5000);
    else this.w.send(request, 5000);
    during?.();
    return this.w.receive(performance.now() + 30_000) as Record<string, unknown>;
  }

  kind(request: unknown): string {
    const r = this.ask(request);
    return r.op === "error" ? `${r.kind}: ${r.message}` : String(r.op);
  }
}

function loadShard(path: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    op: "load_shard",
    model_id: "tiny",
    model_path: path,
    device: "cpu",
    threads: 1,
    kv: { block_size: KV.blockSize, n_blocks: KV.nBlocks, dtype: KV.dtype },
    ...extra,
  };
}

Deno.test("worker: every op, its errors, a step in lockstep, shutdown", () => {
  const leader = new Leader();
  const { comm, id } = CpuCommunicator.create(2);
  const model = openModel(TINY);
  const backend = new CpuBackend({ threads: 1 });
  let shard: ModelInstance | null = null;
  try {
    assertEquals(leader.ask({ op: "ping" }), {
      op: "pong",
      rank: 1,
      world_size: 2,
      cuda_device: 0,
    });
    assertMatch(leader.kind("this is not json"), /^bad_request: not a JSON object/);
    assertMatch(leader.kind({ op: "reticulate" }), /^bad_request: unknown op "reticulate"/);
    // Before init: nothing that needs the group works.
    assertMatch(leader.kind({ op: "nccl_sanity_check" }), /^nccl_not_initialised: /);
    assertMatch(leader.kind(loadShard(TINY)), /^nccl_not_initialised: /);
    for (const op of ["generate_step", "clear_kv_cache", "unload_model"]) {
      const req = { op, model_id: "tiny", tokens: [1], offset: 0 };
      assertMatch(leader.kind(req), /^model_not_loaded: tiny is not loaded/, op);
    }
    // No GPU here: device memory and NCCL ids are cuda_unavailable.
    assertMatch(leader.kind({ op: "query_vram" }), /^cuda_unavailable: CUDA is unavailable/);
    const ncclId = commIdToHex(crypto.getRandomValues(new Uint8Array(128)));
    assertMatch(leader.kind({ op: "init", comm_id: ncclId }), /^cuda_unavailable: /);
    assertMatch(leader.kind({ op: "init", comm_id: "abc" }), /^bad_request: comm_id must be 256/);
    const wrongWorld = commIdToHex(newCpuCommId(3).id);
    assertMatch(
      leader.kind({ op: "init", comm_id: wrongWorld }),
      /^bad_request: the comm id is for 3 ranks; this worker is one of 2/,
    );

    // Rendezvous: the worker blocks in init until this process joins too.
    const init = leader.ask({ op: "init", comm_id: commIdToHex(id) }, () => comm.join());
    assertEquals(init, { op: "init_ok" });
    assertMatch(leader.kind({ op: "init", comm_id: commIdToHex(id) }), /^bad_request: .*already/);
    let seen = 0;
    const sanity = leader.ask({ op: "nccl_sanity_check" }, () => (seen = comm.sanityCheck()));
    assertEquals([sanity, seen], [{ op: "nccl_sanity_result", observed_sum: 2 }, 2]);

    assertMatch(leader.kind(loadShard("/nonexistent.gguf")), /^load_failed: .*nonexistent/);
    assertMatch(
      leader.kind(loadShard(TINY, { file_size: 12 })),
      /^load_failed: .* bytes here, 12 on the leader/,
    );
    assertMatch(
      leader.kind(loadShard(fixture("qwen3-small-q4_k_m.gguf"), { model_id: "small" })),
      /^load_failed: cannot split blk\.0\.attn_output\.weight \(Q4_K\) over 2 ranks/,
    );
    assertEquals(leader.ask(loadShard(TINY)), { op: "load_shard_ok" });
    assertMatch(leader.kind(loadShard(TINY)), /^already_loaded: tiny is already loaded/);

    // A step: the worker's part and this process's part meet in every all-reduce.
    shard = ModelInstance.create(model, backend, KV, { rank: 0, size: 2, collective: comm });
    const layout: StepLayout = {
      positions: Int32Array.of(0, 1, 2),
      sequences: [{ rowStart: 0, rowCount: 3, blockTable: Int32Array.of(2) }],
    };
    const ids = Int32Array.of(9707, 11, 1879);
    const step = stepRequest("tiny", ids, layout, KV.blockSize);
    assertMatch(leader.kind({ ...step, model_id: "other" }), /^model_not_loaded: other is not/);
    assertMatch(leader.kind({ ...step, tokens: [1, 2, 1 << 30] }), /^bad_request: .*vocabulary/);
    let logits: Float32Array = new Float32Array(0);
    const ok = leader.ask(
      step,
      () => (logits = shard!.forward({ ids, layout, logitRows: Int32Array.of(2) })!),
    );
    assertEquals(ok, { op: "generate_step_ok", step: 1 });
    assertEquals(logits.length, 151936);

    assertEquals(leader.ask({ op: "clear_kv_cache", model_id: "tiny" }), {
      op: "kv_cache_cleared",
    });
    assertEquals(leader.ask({ op: "unload_model", model_id: "tiny" }), { op: "unloaded" });
    assertMatch(leader.kind(step), /^model_not_loaded: /);
    assertEquals(leader.ask({ op: "shutdown" }), { op: "bye" });
    assertEquals(leader.w.wait(10_000), { code: 0, signal: null });
  } finally {
    leader.w.kill();
    leader.w.close();
    shard?.close();
    backend.close();
    model.file.close();
    comm.close();
  }
});

Deno.test("worker: end of input exits 0", () => {
  const leader = new Leader();
  try {
    assertEquals(leader.ask({ op: "ping" }).op, "pong");
    leader.w.closeStdin();
    assertEquals(leader.w.wait(10_000), { code: 0, signal: null });
  } finally {
    leader.w.kill();
    leader.w.close();
  }
});

Deno.test("worker: the command line is checked (exit 2, one line)", async () => {
  const cases: Array<[string[], string]> = [
    [["--worker", "--rank", "2", "--tp-size", "2", "--cuda-device", "0"], "--rank 2 is not below"],
    [["--worker", "--rank", "1", "--tp-size", "2"], "--cuda-device is required"],
    [["--worker", "--rank", "x", "--tp-size", "2", "--cuda-device", "0"], "--rank must be"],
    [["--worker", "--rank", "1", "--tp-size", "2", "--cuda-device", "0", "--bogus"], "bogus"],
  ];
  await Promise.all(cases.map(async ([args, text]) => {
    const r = await runNeuron(args);
    assertEquals(r.code, 2, args.join(" "));
    assertMatch(r.stderr, new RegExp(text.replace(/[-.]/g, "\\$&")));
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
  }));
});
