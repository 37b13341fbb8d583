/**
 * Native memory for kernel operands: 64-byte aligned, zeroed, owned by the JS object until
 * `free()`. Typed-array views alias the native memory (no copies).
 */

import { CpuKernelError } from "./errors.ts";

/** Something a kernel can read or write: a native buffer, a typed array, or a raw
 * address (e.g. a tensor in the mmapped GGUF) whose extent the caller vouches for. */
export type Operand = NativeBuffer | ArrayBufferView | Deno.PointerObject;

export class NativeBuffer {
  #pointer: Deno.PointerObject | null;
  #buffer: ArrayBuffer | null = null;
  readonly byteLength: number;
  readonly #release: (p: Deno.PointerObject) => void;

  constructor(
    pointer: Deno.PointerObject,
    byteLength: number,
    release: (p: Deno.PointerObject) => void,
  ) {
    this.#pointer = pointer;
    this.byteLength = byteLength;
    this.#release = release;
  }

  get pointer(): Deno.PointerObject {
    if (this.#pointer === null) {
      throw new CpuKernelError("cpu_kernel_invalid", "native buffer used after free()");
    }
    return this.#pointer;
  }

  get freed(): boolean {
    return this.#pointer === null;
  }

  #bytes(): ArrayBuffer {
    this.#buffer ??= Deno.UnsafePointerView.getArrayBuffer(this.pointer, this.byteLength);
    return this.#buffer;
  }

  f32(): Float32Array {
    return new Float32Array(this.#bytes(), 0, Math.floor(this.byteLength / 4));
  }

  u8(): Uint8Array {
    return new Uint8Array(this.#bytes());
  }

  u16(): Uint16Array {
    return new Uint16Array(this.#bytes(), 0, Math.floor(this.byteLength / 2));
  }

  i32(): Int32Array {
    return new Int32Array(this.#bytes(), 0, Math.floor(this.byteLength / 4));
  }

  /** Releases the memory; views taken earlier must not be used afterwards. */
  free(): void {
    if (this.#pointer === null) return;
    const p = this.#pointer;
    this.#pointer = null;
    this.#buffer = null;
    this.#release(p);
  }
}

/** The address of an operand, after checking it holds at least `bytes` bytes when its size
 * is known. */
export function operandPointer(
  op: string,
  name: string,
  operand: Operand,
  bytes: number,
): Deno.PointerObject {
  let size: number | undefined;
  let pointer: Deno.PointerValue;
  if (operand instanceof NativeBuffer) {
    size = operand.byteLength;
    pointer = operand.pointer;
  } else if (ArrayBuffer.isView(operand)) {
    size = operand.byteLength;
    pointer = Deno.UnsafePointer.of(operand);
  } else {
    pointer = operand;
  }
  if (size !== undefined && size < bytes) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${op}: ${name} holds ${size} bytes, ${bytes} needed`,
    );
  }
  if (pointer === null) {
    throw new CpuKernelError("cpu_kernel_invalid", `${op}: ${name} is empty`);
  }
  return pointer;
}
