/**
 * Starting a tensor-parallel group, in the order the leader runs it (tp_runner.ts): check
 * every worker answers as the rank it should be, rendezvous (`init`: the comm id to
 * everyone, the leader joining concurrently), sanity-check the group with one all-reduce,
 * then load every rank's shard. Each is a fan-out with a deadline of its own; they run once
 * per load, apart from the runner's steps.
 */

import type { Backend, KvPoolSpec } from "../backend/backend.ts";
import type { GgufModel } from "../models/family.ts";
import { ModelInstance } from "../models/instance.ts";
import type { RopeScalingConfig } from "../models/rope_scaling.ts";
import { commIdToHex } from "./comm_id.ts";
import type { Communicator } from "./communicator.ts";
import { CpuCommunicator } from "./cpu_comm.ts";
import { TpError } from "./errors.ts";
import { NcclCommunicator, ncclUniqueId } from "./nccl.ts";
import type { Reply, Request } from "./protocol.ts";
import type { WorkerPool } from "./worker_pool.ts";

const PING_DEADLINE_MS = 60_000;
const INIT_DEADLINE_MS = 120_000;
const LOAD_DEADLINE_MS = 1_800_000;

/** Throws the first error reply of a fan-out as a TpError of its kind, naming the rank. */
export function expectOk(replies: Reply[], what: string): void {
  replies.forEach((r, i) => {
    if (r.op === "error") throw new TpError(r.kind, `${what} on rank ${i + 1}: ${r.message}`);
  });
}

/** Checks every worker answers `ping` as its rank, in a group of `size`, on its device. */
export function ping(pool: WorkerPool, size: number, devices: number[]): void {
  const { replies } = pool.fanOut({ op: "ping" }, () => null, { deadlineMs: PING_DEADLINE_MS });
  expectOk(replies, "ping");
  replies.forEach((r, i) => {
    const want = { rank: i + 1, world_size: size, cuda_device: devices[i + 1] };
    if (
      r.op !== "pong" || r.rank !== want.rank || r.world_size !== want.world_size ||
      r.cuda_device !== want.cuda_device
    ) {
      throw new TpError(
        "tp_worker_failed",
        `worker ${i + 1} answered ping with ${JSON.stringify(r)}, expected ${JSON.stringify(want)}`,
      );
    }
  });
}

/** `init` to every worker while the leader joins too (joining blocks until all have). */
export function rendezvous(
  pool: WorkerPool,
  backend: Backend,
  size: number,
  device: number,
): Communicator {
  let comm: Communicator | null = null;
  const join = (hex: string, leader: () => Communicator): void => {
    const { replies } = pool.fanOut({ op: "init", comm_id: hex }, () => {
      comm = leader();
    }, { deadlineMs: INIT_DEADLINE_MS, abort: () => comm?.abort() });
    expectOk(replies, "init");
  };
  try {
    if (backend.kind === "cuda") {
      const id = ncclUniqueId();
      join(commIdToHex(id), () => NcclCommunicator.init(id, 0, size, { device }));
    } else {
      const { comm: cpu, id } = CpuCommunicator.create(size);
      comm = cpu;
      join(commIdToHex(id), () => {
        cpu.arm(INIT_DEADLINE_MS);
        cpu.join();
        cpu.disarm();
        return cpu;
      });
    }
  } catch (err) {
    (comm as Communicator | null)?.close();
    throw err;
  }
  return comm!;
}

/** Every rank sums 1 over the group (`nccl_sanity_check`): each must see the group size. */
export function sanityCheck(pool: WorkerPool, comm: Communicator): void {
  comm.arm(INIT_DEADLINE_MS);
  try {
    const { leader, replies } = pool.fanOut(
      { op: "nccl_sanity_check" },
      () => comm.sanityCheck(),
      { deadlineMs: INIT_DEADLINE_MS, abort: () => comm.abort() },
    );
    expectOk(replies, "sanity check");
    const observed = [
      leader,
      ...replies.map((r) => r.op === "nccl_sanity_result" ? r.observed_sum : NaN),
    ];
    const wrong = observed.findIndex((v) => v !== comm.size);
    if (wrong >= 0) {
      throw new TpError(
        "nccl_sanity_failed",
        `sanity check: rank ${wrong} observed ${observed[wrong]} after summing 1 over ` +
          `${comm.size} ranks (every rank saw: ${observed.join(", ")})`,
      );
    }
  } finally {
    comm.disarm();
  }
}

/** `load_shard` to every worker while the leader makes its own shard (rank 0). */
export function loadShards(
  pool: WorkerPool,
  comm: Communicator,
  model: GgufModel,
  path: string,
  backend: Backend,
  cpu: { threads: number; mmap: boolean; repack: boolean },
  kv: KvPoolSpec,
  ropeScaling: RopeScalingConfig | undefined,
): ModelInstance {
  let shard: ModelInstance | null = null;
  const request: Request = {
    op: "load_shard",
    model_id: path,
    model_path: path,
    file_size: model.file.size,
    device: backend.kind,
    threads: cpu.threads,
    mmap: cpu.mmap,
    repack: cpu.repack,
    kv: { block_size: kv.blockSize, n_blocks: kv.nBlocks, dtype: kv.dtype },
    ...(ropeScaling && {
      rope_scaling: {
        type: ropeScaling.type,
        factor: ropeScaling.factor,
        original_context_length: ropeScaling.originalContextLength,
      },
    }),
  };
  try {
    const { replies } = pool.fanOut(request, () => {
      shard = ModelInstance.create(model, backend, kv, {
        rank: 0,
        size: comm.size,
        collective: comm,
      });
    }, { deadlineMs: LOAD_DEADLINE_MS });
    expectOk(replies, "loading the shard");
  } catch (err) {
    (shard as ModelInstance | null)?.close();
    throw err;
  }
  return shard!;
}
