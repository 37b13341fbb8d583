/**
 * What the CUDA backend hands to model code: weights, activations and KV caches, each a
 * device address plus shape. Views (rowsOf) share their base's memory and die with it.
 */

import type { GgmlTypeInfo } from "../../gguf/types.ts";
import type { Activation, KvCache, KvCacheSpec, Weight } from "../backend.ts";
import { invalidArgument } from "./errors.ts";

export class CudaWeight implements Weight {
  /** How products with this weight launch (ops_matmul.ts), worked out on first use. */
  matvec: unknown = null;

  constructor(
    readonly name: string,
    /** The type as stored on the device (vectors are expanded to F32). */
    readonly type: GgmlTypeInfo,
    readonly rows: number,
    readonly cols: number,
    readonly ptr: number,
    readonly rowBytes: number,
    /**
     * Whether every value is finite and above zero, as RoPE frequency factors must be
     * (known for 1-row weights, read on the host at load; false for any other).
     */
    readonly positive = false,
  ) {}
}

export class CudaActivation implements Activation {
  #ptr: number;

  constructor(
    readonly rows: number,
    readonly cols: number,
    ptr: number,
    /** The allocation this is a view of, or null for an allocation. */
    readonly base: CudaActivation | null,
  ) {
    this.#ptr = ptr;
  }

  /** Its device address; an error once freed. */
  get ptr(): number {
    if (this.#ptr === 0 || (this.base !== null && this.base.freed)) {
      throw invalidArgument("activation", "used after free()");
    }
    return this.#ptr;
  }

  get freed(): boolean {
    return this.#ptr === 0;
  }

  /** Marks the allocation gone; returns its address for the allocator. */
  release(): number {
    const p = this.#ptr;
    this.#ptr = 0;
    return p;
  }

  /** The allocation's address (a view reports its base's). */
  get basePtr(): number {
    return this.base?.ptr ?? this.ptr;
  }
}

export class CudaKvCache implements KvCache {
  constructor(
    readonly spec: KvCacheSpec,
    readonly bytes: number,
    /** Per layer: device addresses of K and V. */
    readonly k: number[],
    readonly v: number[],
  ) {}
}

export function asActivation(a: Activation, op: string): CudaActivation {
  if (!(a instanceof CudaActivation)) {
    throw invalidArgument(op, "not an activation of this backend");
  }
  return a;
}

export function asWeight(w: Weight, op: string): CudaWeight {
  if (!(w instanceof CudaWeight)) throw invalidArgument(op, "not a weight of this backend");
  return w;
}

export function asCache(c: KvCache, op: string): CudaKvCache {
  if (!(c instanceof CudaKvCache)) throw invalidArgument(op, "not a KV cache of this backend");
  return c;
}
