/**
 * The leader of a tensor-parallel model (rank 0, in the model's engine), seen by the engine
 * as one more ModelRunner. Loading: spawn the workers, check they answer, rendezvous
 * (`init`: the comm id to everyone, the leader joining concurrently), sanity-check the
 * group, then every rank loads its shard (group_start.ts). Each step fans the batch out,
 * runs the leader's part (the only one that computes logits) and drains every worker's
 * reply.
 *
 * Any failure of a step — a worker that died, missed the deadline or failed, or the
 * leader's own part — breaks the group for good: caches may disagree between ranks, so the
 * runner fails every later step with the same `tp_worker_failed` error, and the harness
 * recovers the model by unloading and reloading it.
 */

import type { Backend, KvPoolSpec, Step, StepInterrupt } from "../backend/backend.ts";
import { type RowDraws, rowDrawsOf } from "../backend/row_draws.ts";
import { createBackend, type DeviceChoice } from "../backend/mod.ts";
import { argmax, maskedArgmax } from "../common/argmax.ts";
import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import type { GgufModel, ModelShape } from "../models/family.ts";
import type { ModelInstance } from "../models/instance.ts";
import type { RopeScalingConfig } from "../models/rope_scaling.ts";
import type { Communicator } from "./communicator.ts";
import { TpError } from "./errors.ts";
import { expectOk, loadShards, ping, rendezvous, sanityCheck } from "./group_start.ts";
import { stepRequest } from "./step_message.ts";
import { type WorkerCommand, workerCommand } from "./worker_command.ts";
import { WorkerPool } from "./worker_pool.ts";

const STEP_DEADLINE_MS = 120_000;
const UNLOAD_DEADLINE_MS = 30_000;

export interface TpRunnerOptions {
  device: DeviceChoice;
  /** CPU threads of the whole model (0: every core), shared out evenly between the ranks. */
  threads: number;
  /** CPU: unsliced weights read in place from the mmapped file (default) or copied (false). */
  mmap?: boolean;
  /** CPU: Q8_0, Q4_K and Q6_K matrices repacked at load for few-row products (default true). */
  repack?: boolean;
  tensorParallel: number;
  /** The CUDA device of each rank (default 0..N-1). */
  devices?: number[];
  /** Milliseconds a step may take before the group is aborted. */
  stepDeadlineMs?: number;
  /** Rope scaling asked for at load, applied by every rank to its copy of the file. */
  ropeScaling?: RopeScalingConfig;
  /** How to start a worker (default: this program in worker mode). */
  workerCommand?: WorkerCommand;
}

/** The leader's side of a tensor-parallel model: a ModelRunner (runner/runner.ts). */
export class TpRunner {
  readonly shape: ModelShape;
  readonly worldSize: number;
  #failure: TpError | null = null;
  #steps = 0;
  #closed = false;

  private constructor(
    private readonly modelId: string,
    private readonly backend: Backend,
    private readonly comm: Communicator,
    private readonly pool: WorkerPool,
    private readonly shard: ModelInstance,
    private readonly kv: KvPoolSpec,
    private readonly stepDeadlineMs: number,
    shape: ModelShape,
  ) {
    this.shape = shape;
    this.worldSize = comm.size;
    const draws = rowDrawsOf(backend);
    if (draws) this.drawRows = (...a) => draws.drawRows(...a);
  }

  /** Sampled rows drawn on rank 0's threads, where its backend lends them (RowDraws). */
  readonly drawRows?: RowDraws["drawRows"];

  /** Starts the group for `model` with a KV pool of `kv` on every rank. */
  static open(model: GgufModel, options: TpRunnerOptions, kv: KvPoolSpec): TpRunner {
    const file = model.file;
    const size = options.tensorParallel;
    const devices = options.devices ?? Array.from({ length: size }, (_, i) => i);
    if (devices.length !== size) {
      throw new TpError("load_failed", `${devices.length} devices for ${size} ranks`);
    }
    if (file.path === undefined) {
      throw new TpError(
        "load_failed",
        "tensor parallelism needs a model file its workers can open",
      );
    }
    // Refused before any process starts: heads that do not divide, blocks a split would cut.
    model.checkSplit(size);
    const total = options.threads > 0 ? options.threads : navigator.hardwareConcurrency || 1;
    const threads = Math.max(1, Math.floor(total / size));
    const mmap = options.mmap ?? true;
    const repack = options.repack ?? true;
    const backend = createBackend(options.device, {
      threads,
      mmap,
      repack,
      cuda: { device: devices[0] },
    });
    const undo: Array<() => void> = [() => backend.close()];
    const mlog = log.child({ model: file.path, tensor_parallel: size, device: backend.kind });
    try {
      const command = options.workerCommand ?? workerCommand;
      const pool = WorkerPool.spawn(size, (rank) => command(rank, size, devices[rank]));
      undo.push(() => pool.close());
      ping(pool, size, devices);
      const comm = rendezvous(pool, backend, size, devices[0]);
      undo.push(() => comm.close());
      sanityCheck(pool, comm);
      const shard = loadShards(
        pool,
        comm,
        model,
        file.path,
        backend,
        {
          threads,
          mmap,
          repack,
        },
        kv,
        options.ropeScaling,
      );
      undo.push(() => shard.close());
      mlog.info("tensor-parallel group ready", { devices });
      return new TpRunner(
        file.path,
        backend,
        comm,
        pool,
        shard,
        kv,
        options.stepDeadlineMs ?? STEP_DEADLINE_MS,
        model.shape,
      );
    } catch (err) {
      for (const u of undo.reverse()) u();
      throw err;
    }
  }

  get device(): string {
    return this.backend.kind;
  }

  /** KV cache bytes of every rank together (each holds its heads' share). */
  get kvBytes(): number {
    return this.shard.kvBytes * this.worldSize;
  }

  /**
   * 0: the other ranks' device memory is in other processes, so /models reports the
   * model's size instead.
   */
  deviceBytes(): number {
    return 0;
  }

  /** Steps run in lockstep so far. */
  get steps(): number {
    return this.#steps;
  }

  /** Why the group is broken, or null. */
  get failure(): TpError | null {
    return this.#failure;
  }

  /** Greedy picks from the leader's logits (only rank 0 computes them), masked rows among
   * the tokens their bitsets allow. */
  forwardArgmax(
    step: Step,
    _interrupt?: StepInterrupt,
    masks?: readonly (Uint32Array | null)[],
  ): Int32Array {
    const logits = this.forward(step);
    const vocab = this.shape.vocabSize;
    return Int32Array.from(step.logitRows, (_, i) => {
      const row = logits.subarray(i * vocab, (i + 1) * vocab);
      const mask = masks?.[i] ?? null;
      return mask === null ? argmax(row) : maskedArgmax(row, mask);
    });
  }

  /** Runs one step on every rank, in lockstep; ranks never stop midway. */
  forward(step: Step, _interrupt?: StepInterrupt, into?: Float32Array): Float32Array {
    if (this.#closed) throw new TpError("tp_worker_failed", "the tensor-parallel group is closed");
    if (this.#failure) throw this.#failure;
    const request = stepRequest(this.modelId, step.ids, step.layout, this.kv.blockSize);
    const comm = this.comm;
    comm.arm(this.stepDeadlineMs);
    try {
      const { leader, replies } = this.pool.fanOut(
        request,
        () => this.shard.forward(step, undefined, into)!,
        { deadlineMs: this.stepDeadlineMs, abort: () => comm.abort() },
      );
      comm.disarm();
      if (comm.deadlineExpired) throw new TpError("tp_worker_failed", this.#deadlineMessage());
      const count = this.#steps + 1;
      replies.forEach((r, i) => {
        if (r.op === "error") {
          throw new TpError("tp_worker_failed", `rank ${i + 1} failed the step: ${r.message}`);
        }
        if (r.op === "generate_step_ok" && r.step !== undefined && r.step !== count) {
          throw new TpError(
            "tp_worker_failed",
            `rank ${i + 1} is at step ${r.step}, the leader at ${count}: the ranks left lockstep`,
          );
        }
      });
      this.#steps = count;
      return leader;
    } catch (err) {
      comm.disarm();
      comm.abort();
      throw this.#break(err);
    }
  }

  #deadlineMessage(): string {
    return `a tensor-parallel step took longer than ${this.stepDeadlineMs / 1000} s: ` +
      "the group was aborted";
  }

  #break(err: unknown): TpError {
    const message = this.comm.deadlineExpired
      ? this.#deadlineMessage()
      : err instanceof TpError && err.code === "tp_worker_failed"
      ? err.message
      : `the leader's part of a tensor-parallel step failed: ${errorMessage(err)}`;
    this.#failure = new TpError("tp_worker_failed", message, { cause: err });
    log.error("tensor-parallel group broken", { model: this.modelId, error: message });
    return this.#failure;
  }

  /** Unloads every shard (`unload_model`), shuts the workers down and reaps them. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (!this.#failure && !this.pool.broken) {
        const { replies } = this.pool.fanOut(
          { op: "unload_model", model_id: this.modelId },
          () => this.shard.close(),
          { deadlineMs: UNLOAD_DEADLINE_MS },
        );
        expectOk(replies, "unload");
      }
    } catch (err) {
      log.warn("tensor-parallel unload was not clean", { error: errorMessage(err) });
    } finally {
      this.pool.close();
      this.shard.close();
      this.comm.close();
      this.backend.close();
    }
  }
}
