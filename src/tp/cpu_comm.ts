/**
 * The CPU communicator: the ranks of a group are processes on one host sharing a memory
 * segment (kernels/cpu/comm.c). Its comm id carries a magic prefix, the world size and the
 * segment's random name, so a worker tells it from an NCCL id by its bytes alone and `init`
 * stays exactly as WIRE.md has it. The leader removes the segment's name once every rank
 * has joined; the memory lives until the last rank closes.
 */

import type { ReduceDType } from "../backend/backend.ts";
import { COMM_ID_BYTES } from "./comm_id.ts";
import type { Communicator } from "./communicator.ts";
import { TpError } from "./errors.ts";
import { cString, errnoName, NK_COMM_EABORTED, NK_COMM_EPEER, tpLibrary } from "./native.ts";
import { Watchdog } from "./watchdog.ts";

const MAGIC = new TextEncoder().encode("neuron-cpu-comm\0");
const NAME_BYTES = 16;
/** Bytes per rank and chunk: a hidden-size vector in one chunk, a prefill in a few. */
export const CPU_COMM_SLOT_BYTES = 512 * 1024;

const DTYPES: Record<ReduceDType, number> = { f32: 0, f16: 1 };

export interface CpuCommId {
  world: number;
  /** The shared memory segment's name ("/neuron-tp-<hex>"). */
  name: string;
}

/** A fresh CPU comm id for a group of `world` ranks. */
export function newCpuCommId(world: number): { id: Uint8Array<ArrayBuffer>; parts: CpuCommId } {
  const id = new Uint8Array(COMM_ID_BYTES);
  id.set(MAGIC);
  new DataView(id.buffer).setUint32(MAGIC.length, world, true);
  const random = crypto.getRandomValues(new Uint8Array(NAME_BYTES));
  id.set(random, MAGIC.length + 4);
  return { id, parts: { world, name: segmentName(random) } };
}

function segmentName(random: Uint8Array): string {
  return `/neuron-tp-${Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** The parts of a CPU comm id, or null when `id` is not one (e.g. an NCCL unique id). */
export function parseCpuCommId(id: Uint8Array): CpuCommId | null {
  if (id.length !== COMM_ID_BYTES || MAGIC.some((b, i) => id[i] !== b)) return null;
  const world = new DataView(id.buffer, id.byteOffset).getUint32(MAGIC.length, true);
  const random = id.subarray(MAGIC.length + 4, MAGIC.length + 4 + NAME_BYTES);
  return { world, name: segmentName(random) };
}

function commError(what: string, rc: number, failedRank: number): TpError {
  if (rc === NK_COMM_EPEER) {
    return new TpError("comm_failed", `${what}: the process of rank ${failedRank} is gone`);
  }
  if (rc === NK_COMM_EABORTED) {
    return new TpError("comm_failed", `${what}: the tensor-parallel group was aborted`);
  }
  return new TpError("comm_failed", `${what} failed: ${errnoName(rc)}`);
}

export class CpuCommunicator implements Communicator {
  readonly kind = "cpu" as const;
  readonly memory = "host" as const;
  readonly rank: number;
  readonly size: number;
  #handle: Deno.PointerObject | null;
  #name: string | null;
  readonly #watchdog: Watchdog;
  readonly #one = new Float32Array(1);

  private constructor(handle: Deno.PointerObject, rank: number, size: number, name: string | null) {
    this.#handle = handle;
    this.rank = rank;
    this.size = size;
    this.#name = name;
    try {
      this.#watchdog = Watchdog.create(tpLibrary().path, "nk_comm_abort", handle);
    } catch (err) {
      tpLibrary().sym.nk_comm_close(handle);
      throw err;
    }
  }

  /** Rank 0: creates the segment of a new group; hand `id` to the others, then `join()`. */
  static create(world: number): { comm: CpuCommunicator; id: Uint8Array<ArrayBuffer> } {
    const { id, parts } = newCpuCommId(world);
    const status = new Int32Array(1);
    const h = tpLibrary().sym.nk_comm_create(
      cString(parts.name),
      world,
      BigInt(CPU_COMM_SLOT_BYTES),
      status,
    );
    if (h === null) {
      throw new TpError(
        "nccl_init_failed",
        `cannot create the shared memory segment ${parts.name}: ${errnoName(status[0])}`,
      );
    }
    return { comm: new CpuCommunicator(h, 0, world, parts.name), id };
  }

  /** Any other rank: opens the group named by a CPU comm id (then `join()`). */
  static open(id: CpuCommId, rank: number): CpuCommunicator {
    const status = new Int32Array(1);
    const h = tpLibrary().sym.nk_comm_open(cString(id.name), id.world, rank, status);
    if (h === null) {
      throw new TpError(
        "nccl_init_failed",
        `cannot open the shared memory segment ${id.name} as rank ${rank} of ${id.world}: ` +
          errnoName(status[0]),
      );
    }
    return new CpuCommunicator(h, rank, id.world, null);
  }

  #live(): Deno.PointerObject {
    if (this.#handle === null) throw new TpError("comm_failed", "the communicator is closed");
    return this.#handle;
  }

  #check(what: string, rc: number): void {
    if (rc === 0) return;
    throw commError(what, rc, tpLibrary().sym.nk_comm_failed_rank(this.#live()));
  }

  /** Waits until every rank joined (bounded by the armed deadline). */
  join(): void {
    try {
      this.#check("joining the group", tpLibrary().sym.nk_comm_join(this.#live()));
    } catch (err) {
      throw new TpError("nccl_init_failed", (err as Error).message);
    } finally {
      this.#unlink();
    }
  }

  #unlink(): void {
    if (this.#name === null) return;
    tpLibrary().sym.nk_comm_unlink(cString(this.#name));
    this.#name = null;
  }

  allReduceSum(
    address: bigint,
    count: number,
    dtype: ReduceDType,
    stream: Deno.PointerValue,
  ): void {
    if (stream !== null) {
      throw new TpError("comm_failed", "the CPU communicator reduces host memory only");
    }
    if (count === 0) return;
    const rc = tpLibrary().sym.nk_comm_allreduce(
      this.#live(),
      Deno.UnsafePointer.create(address),
      BigInt(count),
      DTYPES[dtype],
    );
    this.#check("all-reduce", rc);
  }

  broadcast(address: bigint, bytes: number, root: number, stream: Deno.PointerValue): void {
    if (stream !== null) {
      throw new TpError("comm_failed", "the CPU communicator broadcasts host memory only");
    }
    const rc = tpLibrary().sym.nk_comm_broadcast(
      this.#live(),
      Deno.UnsafePointer.create(address),
      BigInt(bytes),
      root,
    );
    this.#check("broadcast", rc);
  }

  barrier(): void {
    this.#check("barrier", tpLibrary().sym.nk_comm_barrier(this.#live()));
  }

  sanityCheck(): number {
    this.#one[0] = 1;
    const address = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(this.#one)));
    this.allReduceSum(address, 1, "f32", null);
    return this.#one[0];
  }

  arm(timeoutMs: number): void {
    this.#watchdog.arm(timeoutMs);
  }

  disarm(): void {
    this.#watchdog.disarm();
  }

  get deadlineExpired(): boolean {
    return this.#watchdog.fired > 0;
  }

  abort(): void {
    if (this.#handle !== null) tpLibrary().sym.nk_comm_abort(this.#handle);
  }

  close(): void {
    if (this.#handle === null) return;
    this.#watchdog.close();
    this.#unlink();
    tpLibrary().sym.nk_comm_close(this.#handle);
    this.#handle = null;
  }
}
