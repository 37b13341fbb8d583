/**
 * Ops recorded for one later foreign call (nk_run_ops, kernels/cpu/oplist.c): a decode
 * step of Qwen3-0.6B is ~420 ops, and one synchronous FFI call per op cost 5-7 µs of
 * JavaScript each (argument conversion, the call) while the pool's workers waited, ~10% of
 * a token; recorded, an op costs under 1 µs. Arguments are checked when an op is recorded,
 * with the errors the immediate calls give; what only the kernels can refuse surfaces from
 * `flush()`, named after the op that failed. The recording itself is op_record.ts; the
 * mixture-of-experts ops are op_list_moe.ts, the KV cache ops op_list_kv.ts.
 */

import { hadamardProblem, type RopeYarn } from "../backend.ts";
import { checkDims, matmulOperands } from "./checks.ts";
import { CpuKernelError } from "./errors.ts";
import type { Operand } from "./native_buffer.ts";
import { KvOps } from "./op_list_kv.ts";
import { address } from "./op_record.ts";

/** Matrices one matmulMany call takes (NK_MANY_MAX in the library). */
export const MATMUL_MANY_MAX = 8;

/** Op codes of oplist.c. */
const OP_GET_ROWS = 1, OP_RMSNORM = 2, OP_MATMUL = 3, OP_ROPE = 4;
const OP_SILU_MUL = 7, OP_ADD = 8, OP_GATHER_ROWS = 9, OP_ARGMAX_ROWS = 10;
const OP_GELU_MUL = 11, OP_ADD_BIAS = 12, OP_SCALE = 13, OP_ARGMAX_ROWS_MASKED = 17;
const OP_HADAMARD = 18;

/** RoPE modes of nk_rope. */
export const ROPE_NEOX = 0, ROPE_NORM = 1;

/** The angles of a rope, as nk_rope takes them. */
export interface RopeAngles {
  freqBase: number;
  /** 1: no position scaling. */
  freqScale: number;
  /** headDim/2 f32 divisors, or null. */
  freqFactors: Operand | null;
  mode: typeof ROPE_NEOX | typeof ROPE_NORM;
  /** YaRN's terms (nk_rope_yarn); null: none. */
  yarn: RopeYarn | null;
}

function checkRows(rows: Int32Array, aRows: number): void {
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (!(r >= 0 && r < aRows)) {
      throw new CpuKernelError("cpu_kernel_invalid", `gatherRows: row ${r} of ${aRows}`);
    }
  }
}

export class OpList extends KvOps {
  /** out[i] = row ids[i] of a [nRows][cols] table of `type`, as f32 (embedding lookup). */
  getRows(
    type: number,
    table: Operand,
    nRows: number,
    cols: number,
    ids: Int32Array,
    out: Operand,
  ): void {
    checkDims("getRows", { nRows, cols });
    const rb = this.rowBytes(type, cols);
    if (rb < 0) {
      throw new CpuKernelError("cpu_kernel_invalid", `getRows: bad type ${type} / cols ${cols}`);
    }
    for (const id of ids) {
      if (id < 0 || id >= nRows) {
        throw new CpuKernelError("cpu_kernel_invalid", `getRows: id ${id} outside [0, ${nRows})`);
      }
    }
    if (ids.length === 0) return;
    const pTable = this.addr("getRows", "table", table, rb * nRows);
    const pOut = this.addr("getRows", "out", out, 4 * cols * ids.length);
    const at = this.copyInts(ids, ids.length);
    this.push("getRows", OP_GET_ROWS, [type, pTable, nRows, cols, at, ids.length, pOut]);
  }

  /** out = x / rms(x) * weight, per row of `dim`; weight may be null, out may be x. */
  rmsnorm(
    out: Operand,
    x: Operand,
    weight: Operand | null,
    nRows: number,
    dim: number,
    eps: number,
  ): void {
    checkDims("rmsnorm", { nRows, dim });
    const bytes = nRows * dim * 4;
    this.push("rmsnorm", OP_RMSNORM, [
      this.addr("rmsnorm", "out", out, bytes),
      this.addr("rmsnorm", "x", x, bytes),
      weight === null ? 0 : this.addr("rmsnorm", "weight", weight, dim * 4),
      nRows,
      dim,
      eps,
    ]);
  }

  /**
   * ys[m][t][r] = sum_c W_m[r][c] x[t][c] for up to 8 matrices of width `cols` that share
   * x: one quantization of x and one pass of the pool over all their rows.
   */
  matmulMany(
    mats: ReadonlyArray<{ type: number; w: Operand; rows: number; y: Operand }>,
    cols: number,
    x: Operand,
    nTokens: number,
  ): void {
    this.#matmul("matmulMany", mats, cols, x, nTokens);
  }

  /** y[t][r] = sum_c W[r][c] x[t][c], W a ggml tensor of `type` read in place. */
  matmul(
    type: number,
    w: Operand,
    rows: number,
    cols: number,
    x: Operand,
    nTokens: number,
    y: Operand,
  ): void {
    this.#matmul("matmul", [{ type, w, rows, y }], cols, x, nTokens);
  }

  #matmul(
    op: string,
    mats: ReadonlyArray<{ type: number; w: Operand; rows: number; y: Operand }>,
    cols: number,
    x: Operand,
    nTokens: number,
  ): void {
    if (mats.length < 1 || mats.length > MATMUL_MANY_MAX) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${mats.length} matrices (1 to ${MATMUL_MANY_MAX})`,
      );
    }
    const args = [mats.length, cols, 0, nTokens];
    for (const m of mats) {
      const [pw, px, py] = matmulOperands(
        (t, c) => this.rowBytes(t, c),
        op,
        m.type,
        m.w,
        m.rows,
        cols,
        x,
        nTokens,
        m.y,
      );
      args[2] = address(px);
      args.push(m.type, address(pw), m.rows, address(py));
      for (const o of [m.w, m.y]) if (ArrayBuffer.isView(o)) this.keep(o);
    }
    if (ArrayBuffer.isView(x)) this.keep(x);
    this.push(op, OP_MATMUL, args);
  }

  /** RoPE in place on x[nTokens][nHeads][headDim], token t at positions[t]. */
  rope(
    x: Operand,
    nTokens: number,
    nHeads: number,
    headDim: number,
    positions: Int32Array,
    angles: RopeAngles,
  ): void {
    checkDims("rope", { nTokens, nHeads, headDim });
    if (positions.length < nTokens) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `rope: ${positions.length} positions for ${nTokens} tokens`,
      );
    }
    const px = this.addr("rope", "x", x, nTokens * nHeads * headDim * 4);
    const pf = angles.freqFactors === null
      ? 0
      : this.addr("rope", "freqFactors", angles.freqFactors, (headDim / 2) * 4);
    const at = this.copyOnce([positions, nTokens], () => this.copyInts(positions, nTokens));
    const y = angles.yarn;
    this.push("rope", OP_ROPE, [
      px,
      nTokens,
      nHeads,
      headDim,
      at,
      angles.freqBase,
      angles.freqScale,
      pf,
      angles.mode,
      y?.extFactor ?? 0,
      y?.low ?? 0,
      y?.high ?? 0,
      y?.mscale ?? 1,
    ]);
  }

  /** out[i] = row rows[i] of a ([aRows][cols] f32), for i < rows.length. */
  gatherRows(out: Operand, a: Operand, aRows: number, cols: number, rows: Int32Array): void {
    checkDims("gatherRows", { aRows, cols });
    checkRows(rows, aRows);
    this.traceCheck(`rows of ${aRows}`, (s) => checkRows(s.logitRows, aRows));
    if (rows.length === 0) return;
    const pOut = this.addr("gatherRows", "out", out, 4 * cols * rows.length);
    const pA = this.addr("gatherRows", "a", a, 4 * cols * aRows);
    const at = this.copyInts(rows, rows.length);
    this.push("gatherRows", OP_GATHER_ROWS, [pOut, pA, cols, at, rows.length]);
  }

  /**
   * out[r] = the index of the largest value of row r of x[rows][cols] (the first of equal
   * ones; NaN never wins; 0 for a row of NaN). Recorded after a step, greedy decoding's pick
   * runs in the step's own call, on logits its threads have just written. With `masks`,
   * row r picks among the columns whose bit its bitset sets (null: all of them); the
   * bitsets are read in place when the list runs (nk_argmax_rows_masked).
   */
  argmaxRows(
    x: Operand,
    rows: number,
    cols: number,
    out: Operand,
    masks?: readonly (Uint32Array | null)[],
  ): void {
    checkDims("argmaxRows", { rows, cols });
    const pX = this.addr("argmaxRows", "x", x, 4 * rows * cols);
    const pOut = this.addr("argmaxRows", "out", out, 4 * rows);
    if (masks === undefined || masks.every((m) => m === null)) {
      this.push("argmaxRows", OP_ARGMAX_ROWS, [pX, rows, cols, pOut]);
      return;
    }
    if (masks.length !== rows) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `argmaxRows: ${masks.length} masks, ${rows} rows`,
      );
    }
    const words = Math.ceil(cols / 32);
    const at = masks.map((m, r) =>
      m === null ? 0 : this.addr("argmaxRows", `mask ${r}`, m, 4 * words)
    );
    this.push("argmaxRows", OP_ARGMAX_ROWS_MASKED, [pX, rows, cols, pOut, ...at]);
  }

  /** out = silu(gate) * up over n values. */
  siluMul(out: Operand, gate: Operand, up: Operand, n: number): void {
    this.#elementwise("siluMul", OP_SILU_MUL, out, gate, up, n, ["out", "gate", "up"]);
  }

  /** out = gelu(gate) * up over n values (GELU's tanh approximation). */
  geluMul(out: Operand, gate: Operand, up: Operand, n: number): void {
    this.#elementwise("geluMul", OP_GELU_MUL, out, gate, up, n, ["out", "gate", "up"]);
  }

  /** out = a + b over n values. */
  add(out: Operand, a: Operand, b: Operand, n: number): void {
    this.#elementwise("add", OP_ADD, out, a, b, n, ["out", "a", "b"]);
  }

  /** out[r] = a[r] + bias for the n / cols rows of `cols` values. */
  addBias(out: Operand, a: Operand, bias: Operand, n: number, cols: number): void {
    checkDims("addBias", { n, cols });
    if (n % cols !== 0) {
      throw new CpuKernelError("cpu_kernel_invalid", `addBias: ${n} values in rows of ${cols}`);
    }
    this.push("addBias", OP_ADD_BIAS, [
      this.addr("addBias", "out", out, 4 * n),
      this.addr("addBias", "a", a, 4 * n),
      this.addr("addBias", "bias", bias, 4 * cols),
      n,
      cols,
    ]);
  }

  /** out = a * factor over n values. */
  scale(out: Operand, a: Operand, factor: number, n: number): void {
    checkDims("scale", { n });
    if (!Number.isFinite(factor)) {
      throw new CpuKernelError("cpu_kernel_invalid", `scale: factor ${factor}`);
    }
    this.push("scale", OP_SCALE, [
      this.addr("scale", "out", out, 4 * n),
      this.addr("scale", "a", a, 4 * n),
      factor,
      n,
    ]);
  }

  /** Every n values of rows x cols floats at x, in place, by the Walsh-Hadamard matrix. */
  hadamard(x: Operand, rows: number, cols: number, n: number): void {
    checkDims("hadamard", { rows, cols });
    const problem = hadamardProblem(cols, n);
    if (problem !== null) throw new CpuKernelError("cpu_kernel_invalid", `hadamard: ${problem}`);
    this.push("hadamard", OP_HADAMARD, [
      this.addr("hadamard", "x", x, 4 * rows * cols),
      rows,
      cols,
      n,
    ]);
  }

  #elementwise(
    op: string,
    code: number,
    out: Operand,
    a: Operand,
    b: Operand,
    n: number,
    names: [string, string, string],
  ): void {
    checkDims(op, { n });
    this.push(op, code, [
      this.addr(op, names[0], out, 4 * n),
      this.addr(op, names[1], a, 4 * n),
      this.addr(op, names[2], b, 4 * n),
      n,
    ]);
  }
}
