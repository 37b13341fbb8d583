/**
 * A tensor-parallel worker (rank 1..N-1): answers the leader's requests, one reply each,
 * never throwing — every failure becomes an `error` reply of the kind WIRE.md names. It
 * joins the group (`init`), checks it (`nccl_sanity_check`), loads its shard, and runs its
 * part of every step in lockstep with the other ranks.
 */

import type { Backend, KvPoolSpec } from "../backend/backend.ts";
import { createBackend, CudaUnavailableError } from "../backend/mod.ts";
import { CudaDriver } from "../backend/cuda/driver.ts";
import { errorMessage } from "../common/errors.ts";
import { type GgufFile, openGguf } from "../gguf/mod.ts";
import { ModelError } from "../models/errors.ts";
import { ModelInstance } from "../models/instance.ts";
import { readModel } from "../models/registry.ts";
import { overrideRopeScaling } from "../models/rope_scaling.ts";
import { commIdFromHex } from "./comm_id.ts";
import type { Communicator } from "./communicator.ts";
import { CpuCommunicator, parseCpuCommId } from "./cpu_comm.ts";
import { isWorkerErrorKind, TpError, type WorkerErrorKind } from "./errors.ts";
import { NcclCommunicator } from "./nccl.ts";
import { errorReply, parseRequest, type Reply, type Request, type RequestOf } from "./protocol.ts";
import { stepFromRequest } from "./step_message.ts";

/** Joining waits for every rank; a leader gone that long is not coming. */
const INIT_DEADLINE_MS = 120_000;
/** A step of this rank; the leader aborts the group much sooner when it gives up. */
const STEP_DEADLINE_MS = 600_000;
const MIB = 1024 * 1024;

export interface WorkerIdentity {
  rank: number;
  worldSize: number;
  cudaDevice: number;
}

interface LoadedShard {
  modelId: string;
  file: GgufFile;
  backend: Backend;
  instance: ModelInstance;
  vocabSize: number;
  kv: KvPoolSpec;
  steps: number;
}

/** The kind of a failure: errors that name one keep it, anything else is `fallback`. */
function kindOf(err: unknown, fallback: WorkerErrorKind): WorkerErrorKind {
  if (err instanceof CudaUnavailableError) return "cuda_unavailable";
  if (err instanceof ModelError && err.code === "unsupported_architecture") {
    return "unsupported_arch";
  }
  if (err instanceof TpError && isWorkerErrorKind(err.code)) return err.code;
  return fallback;
}

export class TpWorker {
  #comm: Communicator | null = null;
  #shard: LoadedShard | null = null;

  constructor(readonly identity: WorkerIdentity) {}

  /** The reply to one request line, and whether the worker should exit after sending it. */
  handle(line: string): { reply: Reply; exit: boolean } {
    let req;
    try {
      req = parseRequest(line);
    } catch (err) {
      return { reply: errorReply("bad_request", errorMessage(err)), exit: false };
    }
    if (req.op === "shutdown") {
      this.close();
      return { reply: { op: "bye" }, exit: true };
    }
    return { reply: this.#dispatch(req), exit: false };
  }

  #dispatch(req: Exclude<Request, { op: "shutdown" }>): Reply {
    const id = this.identity;
    switch (req.op) {
      case "ping":
        return { op: "pong", rank: id.rank, world_size: id.worldSize, cuda_device: id.cudaDevice };
      case "init":
        return this.#attempt("nccl_init_failed", () => this.#init(req.comm_id));
      case "nccl_sanity_check":
        return this.#attempt("nccl_sanity_failed", () => this.#sanity());
      case "load_shard":
        return this.#attempt("load_failed", () => this.#load(req));
      case "generate_step":
        return this.#attempt("forward_failed", () => this.#step(req));
      case "clear_kv_cache":
        return this.#attempt("model_not_loaded", () => {
          // Which positions hold what lives in the leader's block tables; a cleared cache is
          // one whose blocks the leader will write again before reading.
          this.#loaded(req.model_id);
          return { op: "kv_cache_cleared" };
        });
      case "query_vram":
        return this.#attempt("cuda_unavailable", () => this.#vram());
      case "unload_model":
        return this.#attempt("model_not_loaded", () => {
          this.#loaded(req.model_id);
          this.#unload();
          return { op: "unloaded" };
        });
    }
  }

  #attempt(fallback: WorkerErrorKind, fn: () => Reply): Reply {
    try {
      return fn();
    } catch (err) {
      return errorReply(kindOf(err, fallback), errorMessage(err));
    }
  }

  #init(commIdHex: string): Reply {
    if (this.#comm) throw new TpError("bad_request", "the communicator is already initialised");
    const { rank, worldSize, cudaDevice } = this.identity;
    const id = commIdFromHex(commIdHex);
    const cpu = parseCpuCommId(id);
    if (cpu === null) {
      this.#comm = NcclCommunicator.init(id, rank, worldSize, { device: cudaDevice });
      return { op: "init_ok" };
    }
    if (cpu.world !== worldSize) {
      throw new TpError(
        "bad_request",
        `the comm id is for ${cpu.world} ranks; this worker is one of ${worldSize}`,
      );
    }
    const comm = CpuCommunicator.open(cpu, rank);
    try {
      comm.arm(INIT_DEADLINE_MS);
      comm.join();
      comm.disarm();
    } catch (err) {
      comm.abort();
      comm.close();
      throw err;
    }
    this.#comm = comm;
    return { op: "init_ok" };
  }

  #requireComm(): Communicator {
    if (this.#comm) return this.#comm;
    throw new TpError("nccl_not_initialised", "no communicator yet: send init first");
  }

  #sanity(): Reply {
    const comm = this.#requireComm();
    comm.arm(INIT_DEADLINE_MS);
    try {
      return { op: "nccl_sanity_result", observed_sum: comm.sanityCheck() };
    } finally {
      comm.disarm();
    }
  }

  #load(req: RequestOf<"load_shard">): Reply {
    if (this.#shard) {
      throw new TpError("already_loaded", `${this.#shard.modelId} is already loaded here`);
    }
    const { rank, worldSize, cudaDevice } = this.identity;
    const comm = worldSize > 1 ? this.#requireComm() : null;
    const file = openGguf(req.model_path, { populate: true });
    let backend: Backend | null = null;
    try {
      if (req.file_size !== undefined && file.size !== req.file_size) {
        throw new TpError(
          "load_failed",
          `${req.model_path} has ${file.size} bytes here, ${req.file_size} on the leader`,
        );
      }
      backend = createBackend(req.device, {
        threads: req.threads,
        mmap: req.mmap,
        repack: req.repack,
        cuda: { device: cudaDevice },
      });
      const wants = backend.kind === "cuda" ? "nccl" : "cpu";
      if (comm && comm.kind !== wants) {
        throw new TpError(
          "load_failed",
          `a ${backend.kind} shard needs the ${wants} communicator, this group uses ${comm.kind}`,
        );
      }
      const kv = { blockSize: req.kv.block_size, nBlocks: req.kv.n_blocks, dtype: req.kv.dtype };
      if (req.rope_scaling) {
        const r = req.rope_scaling;
        overrideRopeScaling(file, {
          type: r.type,
          factor: r.factor,
          originalContextLength: r.original_context_length,
        });
      }
      const model = readModel(file);
      const instance = ModelInstance.create(model, backend, kv, {
        rank,
        size: worldSize,
        collective: comm,
      });
      const vocabSize = model.shape.vocabSize;
      this.#shard = { modelId: req.model_id, file, backend, instance, vocabSize, kv, steps: 0 };
      return { op: "load_shard_ok" };
    } catch (err) {
      backend?.close();
      file.close();
      throw err;
    }
  }

  #loaded(modelId: string): LoadedShard {
    const shard = this.#shard;
    if (shard && shard.modelId === modelId) return shard;
    throw new TpError(
      "model_not_loaded",
      shard ? `${modelId} is not loaded here (${shard.modelId} is)` : `${modelId} is not loaded`,
    );
  }

  #step(req: RequestOf<"generate_step">): Reply {
    const shard = this.#loaded(req.model_id);
    const step = stepFromRequest(req, shard.vocabSize, shard.kv);
    const comm = this.#comm;
    comm?.arm(STEP_DEADLINE_MS);
    try {
      shard.instance.forward(step);
    } finally {
      comm?.disarm();
    }
    return { op: "generate_step_ok", step: ++shard.steps };
  }

  #vram(): Reply {
    const dev = this.identity.cudaDevice;
    const driver = CudaDriver.open("libcuda.so.1");
    try {
      driver.retainPrimaryContext(dev);
      try {
        const { free, total } = driver.memInfo();
        return {
          op: "vram_info",
          free_mb: Math.floor(free / MIB),
          total_mb: Math.floor(total / MIB),
        };
      } finally {
        driver.releasePrimaryContext(dev);
      }
    } finally {
      driver.close();
    }
  }

  #unload(): void {
    const shard = this.#shard;
    if (!shard) return;
    this.#shard = null;
    shard.instance.close();
    shard.backend.close();
    shard.file.close();
  }

  /** Frees the shard and leaves the group. */
  close(): void {
    this.#unload();
    this.#comm?.close();
    this.#comm = null;
  }
}
