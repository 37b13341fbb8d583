/**
 * What every rank of a tensor-parallel group shares: sums, broadcasts and barriers with the
 * same semantics whether the ranks are processes on one host (cpu_comm.ts) or GPUs
 * (nccl.ts). Model code only sees the `Collective` part (backend.ts); the runners also
 * rendezvous, check sanity, enforce step deadlines and tear groups down.
 */

import type { Collective, ReduceDType } from "../backend/backend.ts";

export type CommKind = "cpu" | "nccl";

export interface Communicator extends Collective {
  readonly kind: CommKind;
  /** Where the buffers it reduces live: host memory (CPU backends) or device memory. */
  readonly memory: "host" | "device";

  /** Copies `bytes` at `address` of rank `root` to every other rank. */
  broadcast(address: bigint, bytes: number, root: number, stream: Deno.PointerValue): void;

  barrier(): void;

  /**
   * All-reduces 1 from every rank (WIRE.md `nccl_sanity_check`) and returns what this rank
   * observed: the world size when the group is sound.
   */
  sanityCheck(): number;

  /**
   * Starts a step deadline: past it the group is aborted, so a collective blocked on a rank
   * that never comes returns with an error instead of hanging. `disarm` ends it.
   */
  arm(timeoutMs: number): void;
  disarm(): void;
  /** Whether a deadline ever expired (the group is then aborted). */
  readonly deadlineExpired: boolean;

  /** Fails every pending and later collective, on every rank. */
  abort(): void;
  close(): void;
}

export type { Collective, ReduceDType };
