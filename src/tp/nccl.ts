/**
 * The NCCL communicator through Deno.dlopen: the leader mints an ncclUniqueId, every rank
 * joins with ncclCommInitRank on its own GPU (the device's primary context, current on the
 * calling thread, as the CUDA backend leaves it), and reductions are enqueued with
 * ncclAllReduce on the model's stream. A step deadline aborts the communicator from a
 * native watchdog thread (ncclCommAbort), which releases a rank stuck in a collective.
 *
 * Communicators are non-blocking (NCCL_COMM_BLOCKING=0 unless the environment says
 * otherwise): a call may answer ncclInProgress, and its completion is polled with
 * ncclCommGetAsyncError against a deadline, so a rank that never joins fails the init
 * instead of hanging it.
 *
 * Without libcuda or a device the answer is `cuda_unavailable`; without libnccl, or when
 * NCCL itself fails, `nccl_init_failed` with NCCL's own words.
 */

import type { ReduceDType } from "../backend/backend.ts";
import { CudaDriver } from "../backend/cuda/driver.ts";
import { CU_STREAM_NON_BLOCKING } from "../backend/cuda/driver_symbols.ts";
import { searchDirs } from "../backend/cuda/libraries.ts";
import { errorMessage } from "../common/errors.ts";
import { COMM_ID_BYTES } from "./comm_id.ts";
import type { Communicator } from "./communicator.ts";
import { TpError } from "./errors.ts";
import { Watchdog } from "./watchdog.ts";

const UNIQUE_ID = { struct: Array<"u8">(COMM_ID_BYTES).fill("u8") } as const;

export const NCCL_SYMBOLS = {
  ncclGetVersion: { parameters: ["buffer"], result: "i32" },
  ncclGetUniqueId: { parameters: ["buffer"], result: "i32" },
  ncclCommInitRank: { parameters: ["buffer", "i32", UNIQUE_ID, "i32"], result: "i32" },
  ncclAllReduce: {
    parameters: ["u64", "u64", "usize", "i32", "i32", "pointer", "pointer"],
    result: "i32",
  },
  ncclBroadcast: {
    parameters: ["u64", "u64", "usize", "i32", "i32", "pointer", "pointer"],
    result: "i32",
  },
  ncclCommAbort: { parameters: ["pointer"], result: "i32" },
  ncclCommGetAsyncError: { parameters: ["pointer", "buffer"], result: "i32" },
  ncclCommDestroy: { parameters: ["pointer"], result: "i32" },
  ncclGetErrorString: { parameters: ["i32"], result: "pointer" },
} as const;

type NcclSymbols = Deno.DynamicLibrary<typeof NCCL_SYMBOLS>["symbols"];

/** ncclDataType_t and ncclRedOp_t values (nccl.h). */
const NCCL_UINT8 = 1;
const NCCL_FLOAT16 = 6;
const NCCL_FLOAT32 = 7;
const NCCL_SUM = 0;
const NCCL_IN_PROGRESS = 7;
/** How long one in-progress call may take (steps are bounded by the watchdog sooner). */
const SETTLE_MS = 120_000;
const DTYPES: Record<ReduceDType, number> = { f32: NCCL_FLOAT32, f16: NCCL_FLOAT16 };

export const DEFAULT_LIBNCCL = "libnccl.so.2";

export interface NcclLibrary {
  path: string;
  sym: NcclSymbols;
}

const opened = new Map<string, NcclLibrary>();

/** The places `configured` may load from: as given, then beside the CUDA libraries. */
export function ncclCandidates(configured: string): string[] {
  if (configured.includes("/")) return [configured];
  const found = searchDirs("libcublas").map((dir) => `${dir}/${configured}`).filter((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });
  return [configured, ...new Set(found)];
}

/** Opens libnccl once per name; `nccl_init_failed` with every loader message otherwise. */
export function openNccl(configured = DEFAULT_LIBNCCL): NcclLibrary {
  const cached = opened.get(configured);
  if (cached) return cached;
  const failures: string[] = [];
  for (const path of ncclCandidates(configured)) {
    try {
      const lib = { path, sym: Deno.dlopen(path, NCCL_SYMBOLS).symbols };
      opened.set(configured, lib);
      return lib;
    } catch (err) {
      failures.push(`${path}: ${errorMessage(err)}`);
    }
  }
  throw new TpError("nccl_init_failed", `cannot load NCCL (${configured}): ${failures.join("; ")}`);
}

function ncclText(lib: NcclLibrary, rc: number): string {
  const p = lib.sym.ncclGetErrorString(rc);
  return `${p ? Deno.UnsafePointerView.getCString(p) : "unknown error"} (${rc})`;
}

/** A new ncclUniqueId (on the leader, before any rank joins). */
export function ncclUniqueId(libnccl = DEFAULT_LIBNCCL): Uint8Array<ArrayBuffer> {
  const lib = openNccl(libnccl);
  const id = new Uint8Array(COMM_ID_BYTES);
  const rc = lib.sym.ncclGetUniqueId(id);
  if (rc !== 0) throw new TpError("nccl_init_failed", `ncclGetUniqueId: ${ncclText(lib, rc)}`);
  return id;
}

export interface NcclOptions {
  /** CUDA device of this rank. */
  device: number;
  libnccl?: string;
  libcuda?: string;
  /** Milliseconds to wait for every rank to join (default 120 s). */
  initTimeoutMs?: number;
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Polls a non-blocking communicator until its last call completed; throws its failure. */
function settle(lib: NcclLibrary, comm: Deno.PointerObject, what: string, timeoutMs: number): void {
  const state = new Int32Array(1);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const rc = lib.sym.ncclCommGetAsyncError(comm, state);
    if (rc !== 0) throw new TpError("comm_failed", `${what}: ${ncclText(lib, rc)}`);
    if (state[0] === 0) return;
    if (state[0] !== NCCL_IN_PROGRESS) {
      throw new TpError("comm_failed", `${what}: ${ncclText(lib, state[0])}`);
    }
    if (performance.now() > deadline) {
      throw new TpError("comm_failed", `${what}: not done after ${timeoutMs / 1000} s`);
    }
    Atomics.wait(sleeper, 0, 0, 1);
  }
}

export class NcclCommunicator implements Communicator {
  readonly kind = "nccl" as const;
  readonly memory = "device" as const;
  #comm: Deno.PointerObject | null;
  #aborted = false;
  /** The sanity check's value, in pinned memory: an async copy reads or writes it after
   * the call returns, so it must not be a JS buffer the collector may move or free. */
  readonly #host: Float32Array;

  private constructor(
    readonly rank: number,
    readonly size: number,
    comm: Deno.PointerObject,
    private readonly lib: NcclLibrary,
    private readonly driver: CudaDriver,
    private readonly device: number,
    private readonly stream: Deno.PointerValue,
    private readonly scratch: number,
    private readonly pinned: { ptr: Deno.PointerObject; buffer: ArrayBuffer },
    private readonly watchdog: Watchdog,
  ) {
    this.#comm = comm;
    this.#host = new Float32Array(pinned.buffer, 0, 1);
  }

  /**
   * Joins the group of `id` as `rank` of `size` on `options.device`. Blocks until every
   * rank joined (NCCL's rendezvous), so the leader writes `init` to its workers first.
   */
  static init(id: Uint8Array, rank: number, size: number, options: NcclOptions): NcclCommunicator {
    const driver = CudaDriver.open(options.libcuda ?? "libcuda.so.1");
    const undo: Array<() => void> = [() => driver.close()];
    try {
      const lib = openNccl(options.libnccl);
      driver.retainPrimaryContext(options.device);
      undo.push(() => driver.releasePrimaryContext(options.device));
      const stream = driver.streamCreate(CU_STREAM_NON_BLOCKING);
      undo.push(() => driver.sym.cuStreamDestroy_v2(stream));
      const { ptr: scratch, rc: allocRc } = driver.memAlloc(4);
      driver.check("cuMemAlloc_v2", allocRc);
      undo.push(() => driver.memFree(scratch));
      const pinned = driver.memAllocHost(4);
      undo.push(() => driver.memFreeHost(pinned.ptr));
      if (Deno.env.get("NCCL_COMM_BLOCKING") === undefined) Deno.env.set("NCCL_COMM_BLOCKING", "0");
      const out = new BigUint64Array(1);
      const rc = lib.sym.ncclCommInitRank(out, size, Uint8Array.from(id), rank);
      const what = `ncclCommInitRank (rank ${rank} of ${size}, device ${options.device})`;
      const comm = Deno.UnsafePointer.create(out[0]);
      if ((rc !== 0 && rc !== NCCL_IN_PROGRESS) || comm === null) {
        throw new TpError("nccl_init_failed", `${what}: ${ncclText(lib, rc)}`);
      }
      try {
        settle(lib, comm, what, options.initTimeoutMs ?? SETTLE_MS);
      } catch (err) {
        lib.sym.ncclCommAbort(comm);
        throw new TpError("nccl_init_failed", errorMessage(err));
      }
      let watchdog: Watchdog;
      try {
        watchdog = Watchdog.create(lib.path, "ncclCommAbort", comm);
      } catch (err) {
        lib.sym.ncclCommDestroy(comm);
        throw err;
      }
      return new NcclCommunicator(
        rank,
        size,
        comm,
        lib,
        driver,
        options.device,
        stream,
        scratch,
        pinned,
        watchdog,
      );
    } catch (err) {
      for (const u of undo.reverse()) u();
      throw err;
    }
  }

  #live(): Deno.PointerObject {
    if (this.#comm === null || this.#aborted) {
      throw new TpError("comm_failed", "the NCCL communicator was aborted or closed");
    }
    return this.#comm;
  }

  #check(call: string, rc: number): void {
    if (rc === NCCL_IN_PROGRESS) settle(this.lib, this.#live(), call, SETTLE_MS);
    else if (rc !== 0) throw new TpError("comm_failed", `${call}: ${ncclText(this.lib, rc)}`);
  }

  allReduceSum(
    address: bigint,
    count: number,
    dtype: ReduceDType,
    stream: Deno.PointerValue,
  ): void {
    if (stream === null) {
      throw new TpError("comm_failed", "NCCL reduces device memory: a stream is required");
    }
    const rc = this.lib.sym.ncclAllReduce(
      address,
      address,
      BigInt(count),
      DTYPES[dtype],
      NCCL_SUM,
      this.#live(),
      stream,
    );
    this.#check("ncclAllReduce", rc);
  }

  broadcast(address: bigint, bytes: number, root: number, stream: Deno.PointerValue): void {
    if (stream === null) {
      throw new TpError("comm_failed", "NCCL broadcasts device memory: a stream is required");
    }
    const rc = this.lib.sym.ncclBroadcast(
      address,
      address,
      BigInt(bytes),
      NCCL_UINT8,
      root,
      this.#live(),
      stream,
    );
    this.#check("ncclBroadcast", rc);
  }

  #sync(): void {
    this.driver.check("cuStreamSynchronize", this.driver.sym.cuStreamSynchronize(this.stream));
    if (this.watchdog.fired > 0) {
      this.#aborted = true;
      throw new TpError("comm_failed", "the NCCL communicator was aborted at its step deadline");
    }
  }

  barrier(): void {
    this.allReduceSum(BigInt(this.scratch), 1, "f32", this.stream);
    this.#sync();
  }

  sanityCheck(): number {
    this.#host[0] = 1;
    const host = this.pinned.ptr;
    const d = this.driver;
    const dev = BigInt(this.scratch);
    d.check("cuMemcpyHtoDAsync", d.sym.cuMemcpyHtoDAsync_v2(dev, host, 4n, this.stream));
    this.allReduceSum(dev, 1, "f32", this.stream);
    d.check("cuMemcpyDtoHAsync", d.sym.cuMemcpyDtoHAsync_v2(host, dev, 4n, this.stream));
    this.#sync();
    return this.#host[0];
  }

  arm(timeoutMs: number): void {
    this.watchdog.arm(timeoutMs);
  }

  disarm(): void {
    this.watchdog.disarm();
  }

  get deadlineExpired(): boolean {
    return this.watchdog.fired > 0;
  }

  abort(): void {
    if (this.#comm === null || this.#aborted) return;
    this.#aborted = true;
    this.lib.sym.ncclCommAbort(this.#comm);
  }

  close(): void {
    if (this.#comm === null) return;
    this.watchdog.close();
    // An aborted communicator is already freed by ncclCommAbort.
    if (!this.#aborted && this.watchdog.fired === 0) this.lib.sym.ncclCommDestroy(this.#comm);
    this.#comm = null;
    this.driver.memFree(this.scratch);
    this.driver.memFreeHost(this.pinned.ptr);
    this.driver.sym.cuStreamDestroy_v2(this.stream);
    this.driver.releasePrimaryContext(this.device);
    this.driver.close();
  }
}
