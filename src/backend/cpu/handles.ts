/**
 * The CPU backend's handles: a weight is a pointer into the mapped file or the weight arena,
 * an activation a native buffer (or a view of one); the backend casts the interface types
 * back through these helpers.
 */

import type { Activation, Weight } from "../backend.ts";
import type { GgmlTypeInfo } from "../../gguf/types.ts";
import type { NativeBuffer } from "./native_buffer.ts";

export class CpuWeight implements Weight {
  constructor(
    readonly name: string,
    readonly type: GgmlTypeInfo,
    readonly rows: number,
    readonly cols: number,
    readonly pointer: Deno.PointerObject,
    /** The type the kernels read it as: the GGUF type, or the one it was repacked into
     * (repacked.ts). */
    readonly kernelType: number = type.id,
  ) {}
}

export class CpuActivation implements Activation {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly buffer: NativeBuffer,
    /** Views share the buffer of the activation they were taken from. */
    readonly owner: boolean,
  ) {}

  get pointer(): Deno.PointerObject {
    return this.buffer.pointer;
  }
}

/** The CPU activation behind `a`. */
export function act(a: Activation): CpuActivation {
  return a as CpuActivation;
}

/** Where the values of `a` start. */
export function pointerOf(a: Activation): Deno.PointerObject {
  return act(a).pointer;
}

/** The CPU weight behind `w`. */
export function weight(w: Weight): CpuWeight {
  return w as CpuWeight;
}
