/**
 * The mixture-of-experts ops of the op list (kernels/cpu/moe_route.c, moe.c): routing, the
 * experts' products grouped by expert, and their weighted sum. Expert indices travel as f32 in
 * native buffers from the routing op to the others, so a recorded step replays with
 * whatever experts its tokens choose.
 */

import { checkDims } from "./checks.ts";
import { CpuKernelError } from "./errors.ts";
import type { Operand } from "./native_buffer.ts";
import { OpRecord } from "./op_record.ts";

/** Op codes of oplist.c. */
const OP_MOE_ROUTE = 14, OP_MATMUL_EXPERTS = 15, OP_MOE_COMBINE = 16;

/** Experts one layer may have (llama.cpp's LLAMA_MAX_EXPERTS, the kernels' NK_MAX_EXPERTS). */
export const MAX_EXPERTS = 512;

/** Expert stacks one matmulExperts call takes. */
export const EXPERTS_MANY_MAX = 8;

/** One stack of expert matrices and where its products go. */
export interface ExpertOperand {
  type: number;
  /** Expert 0's first row; expert e's starts `stride` bytes after expert e - 1's. */
  w: Operand;
  stride: number;
  rows: number;
  y: Operand;
}

function checkRouting(op: string, nExperts: number, k: number): void {
  checkDims(op, { nExperts, k });
  if (nExperts > MAX_EXPERTS || k > nExperts) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${op}: ${k} of ${nExperts} experts (at most ${MAX_EXPERTS} experts, k at most all)`,
    );
  }
}

export class MoeOps extends OpRecord {
  /**
   * ids[t][j], weights[t][j] = the k experts llama.cpp's softmax gating picks for row t of
   * logits[nRows][nExperts] and their weights (normalised over the k when `normalize`).
   */
  moeRoute(
    logits: Operand,
    nRows: number,
    nExperts: number,
    k: number,
    normalize: boolean,
    ids: Operand,
    weights: Operand,
  ): void {
    checkDims("moeRoute", { nRows });
    checkRouting("moeRoute", nExperts, k);
    this.push("moeRoute", OP_MOE_ROUTE, [
      this.addr("moeRoute", "logits", logits, 4 * nRows * nExperts),
      nRows,
      nExperts,
      k,
      normalize ? 1 : 0,
      this.addr("moeRoute", "ids", ids, 4 * nRows * k),
      this.addr("moeRoute", "weights", weights, 4 * nRows * k),
    ]);
  }

  /**
   * mats[m].y[t·k + j] = expert ids[t][j] of mats[m] times x row t (xRows = nTokens) or
   * t·k + j (xRows = nTokens·k), for up to 8 stacks of width `cols` that share x.
   */
  matmulExperts(
    mats: readonly ExpertOperand[],
    nExperts: number,
    cols: number,
    x: Operand,
    xRows: number,
    ids: Operand,
    nTokens: number,
    k: number,
  ): void {
    const op = "matmulExperts";
    checkDims(op, { cols, nTokens });
    checkRouting(op, nExperts, k);
    if (mats.length < 1 || mats.length > EXPERTS_MANY_MAX) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${mats.length} expert stacks (1 to ${EXPERTS_MANY_MAX})`,
      );
    }
    if (xRows !== nTokens && xRows !== nTokens * k) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: x has ${xRows} rows for ${nTokens} tokens of ${k} experts`,
      );
    }
    const args = [
      mats.length,
      nExperts,
      cols,
      this.addr(op, "x", x, 4 * xRows * cols),
      xRows,
      this.addr(op, "ids", ids, 4 * nTokens * k),
      nTokens,
      k,
    ];
    for (const m of mats) {
      checkDims(op, { rows: m.rows });
      const rb = this.rowBytes(m.type, cols);
      if (rb < 0) {
        throw new CpuKernelError(
          "cpu_kernel_invalid",
          `${op}: type ${m.type} with ${cols} columns is not computable here`,
        );
      }
      if (!(Number.isSafeInteger(m.stride) && m.stride >= rb * m.rows)) {
        throw new CpuKernelError(
          "cpu_kernel_invalid",
          `${op}: expert stride ${m.stride} is shorter than an expert (${rb * m.rows} bytes)`,
        );
      }
      const wBytes = (nExperts - 1) * m.stride + rb * m.rows;
      args.push(
        m.type,
        this.addr(op, "weights", m.w, wBytes),
        m.stride,
        m.rows,
        this.addr(op, "y", m.y, 4 * nTokens * k * m.rows),
      );
    }
    this.push(op, OP_MATMUL_EXPERTS, args);
  }

  /** out[t] = sum_j weights[t][j] · experts[t·k + j], rows of `cols`, f32 in slot order. */
  moeCombine(
    out: Operand,
    experts: Operand,
    weights: Operand,
    nTokens: number,
    k: number,
    cols: number,
  ): void {
    checkDims("moeCombine", { nTokens, k, cols });
    this.push("moeCombine", OP_MOE_COMBINE, [
      this.addr("moeCombine", "out", out, 4 * nTokens * cols),
      this.addr("moeCombine", "experts", experts, 4 * nTokens * k * cols),
      this.addr("moeCombine", "weights", weights, 4 * nTokens * k),
      nTokens,
      k,
      cols,
    ]);
  }
}
