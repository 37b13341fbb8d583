/**
 * Recording the element-wise ops (kernels/cuda/elementwise.cu): operands checked, then one
 * grid-stride launch over every value. The SiLU gate and add may fuse with what precedes
 * or follows them (fusion.ts); the backend decides that before it comes here.
 */

import { type Activation, hadamardProblem, type Weight } from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import { asActivation, asWeight, type CudaActivation } from "./resources.ts";

const THREADS = 256;
const MAX_BLOCKS = 4096;

export interface Operands {
  o: CudaActivation;
  x: CudaActivation;
  y: CudaActivation;
  /** Values of x (and y); out holds at least as many. */
  n: number;
}

/** An op's out, a and b, checked: a and b of one size, out at least as large. */
export function operands(op: string, out: Activation, a: Activation, b: Activation): Operands {
  const o = asActivation(out, op);
  const x = asActivation(a, op);
  const y = asActivation(b, op);
  const n = x.rows * x.cols;
  if (y.rows * y.cols !== n || o.rows * o.cols < n) {
    throw invalidArgument(op, `${x.rows}x${x.cols}, ${y.rows}x${y.cols} into ${o.rows}x${o.cols}`);
  }
  return { o, x, y, n };
}

function grid(n: number): number {
  return Math.min(Math.ceil(n / THREADS), MAX_BLOCKS);
}

/** out = f(x, y) over n values by kernel `name` (silu_mul, gelu_mul, add_f32). */
export function launchBinary(ctx: CudaContext, name: string, v: Operands): void {
  ctx.runner.tape.launch(ctx.k(name), grid(v.n), 1, 1, THREADS)
    .p(v.o.ptr).p(v.x.ptr).p(v.y.ptr).i(v.n).end();
}

/** out = a + bias on every row; returns out. */
export function recordAddBias(
  ctx: CudaContext,
  out: Activation,
  a: Activation,
  bias: Weight,
): CudaActivation {
  const o = asActivation(out, "addBias");
  const x = asActivation(a, "addBias");
  const b = asWeight(bias, "addBias");
  const n = x.rows * x.cols;
  if (b.rows !== 1 || b.cols !== x.cols || o.rows * o.cols < n) {
    throw invalidArgument(
      "addBias",
      `${x.rows}x${x.cols} + ${b.name} (${b.rows}x${b.cols}) into ${o.rows}x${o.cols}`,
    );
  }
  ctx.runner.tape.launch(ctx.k("add_bias"), grid(n), 1, 1, THREADS)
    .p(o.ptr).p(x.ptr).p(b.ptr).i(n).i(x.cols).end();
  return o;
}

/** out = a * factor; returns out. */
export function recordScale(
  ctx: CudaContext,
  out: Activation,
  a: Activation,
  factor: number,
): CudaActivation {
  const o = asActivation(out, "scale");
  const x = asActivation(a, "scale");
  const n = x.rows * x.cols;
  if (o.rows * o.cols < n) {
    throw invalidArgument("scale", `${x.rows}x${x.cols} into ${o.rows}x${o.cols}`);
  }
  if (!Number.isFinite(Math.fround(factor))) throw invalidArgument("scale", `factor ${factor}`);
  ctx.runner.tape.launch(ctx.k("scale_f32"), grid(n), 1, 1, THREADS)
    .p(o.ptr).p(x.ptr).f(factor).i(n).end();
  return o;
}

/** Chunk sizes hadamard_rows rotates (its shared memory). */
const HADAMARD_MAX = 1024;
const HADAMARD_THREADS = 128;

/** Every n values of every row of a by the Walsh-Hadamard matrix, in place; returns a. */
export function recordHadamard(ctx: CudaContext, a: Activation, n: number): CudaActivation {
  const x = asActivation(a, "hadamard");
  const problem = hadamardProblem(x.cols, n) ??
    (n > HADAMARD_MAX ? `chunk ${n} is over ${HADAMARD_MAX}` : null);
  if (problem !== null) throw invalidArgument("hadamard", problem);
  const chunks = x.rows * x.cols / n;
  if (chunks > 0) {
    ctx.runner.tape.launch(ctx.k("hadamard_rows"), chunks, 1, 1, HADAMARD_THREADS)
      .p(x.ptr).i(n).end();
  }
  return x;
}
