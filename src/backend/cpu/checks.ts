/** Argument checks shared by the kernel wrappers. */

import { CpuKernelError } from "./errors.ts";
import { type Operand, operandPointer } from "./native_buffer.ts";
import { kernelTypeName } from "./kernel_types.ts";

export function checkDims(op: string, dims: Record<string, number>, allowZero = false): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isSafeInteger(v) || v < 0 || (!allowZero && v === 0)) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${name} must be a positive integer, got ${v}`,
      );
    }
  }
}

/** Checks a matrix product's operands; returns the addresses of W, x and y. */
export function matmulOperands(
  rowBytes: (type: number, cols: number) => number,
  op: string,
  type: number,
  w: Operand,
  rows: number,
  cols: number,
  x: Operand,
  nTokens: number,
  y: Operand,
): [Deno.PointerObject, Deno.PointerObject, Deno.PointerObject] {
  checkDims(op, { rows, cols, nTokens });
  const name = kernelTypeName(type);
  const rb = rowBytes(type, cols);
  if (name === null || rb < 0) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${op}: type ${name ?? type} with ${cols} columns is not computable here`,
    );
  }
  return [
    operandPointer(op, "weights", w, rb * rows),
    operandPointer(op, "x", x, nTokens * cols * 4),
    operandPointer(op, "y", y, nTokens * rows * 4),
  ];
}
