/**
 * The paged KV cache ops of the op list (kernels/cpu/attention.c): storing each row's k and
 * v at its position's slot, and attention over the cached positions. Both take a step's
 * sequences (block tables, positions), checked and copied the same way once per step, so
 * they live apart from the ops on plain activations.
 */

import { checkDims } from "./checks.ts";
import { CpuKernelError } from "./errors.ts";
import { checkSequences, type KvLayout, kvLayoutBytes, type KvSequence } from "./kv_layout.ts";
import type { Operand } from "./native_buffer.ts";
import { MoeOps } from "./op_list_moe.ts";

/** Op codes of oplist.c. */
const OP_KV_STORE = 5, OP_ATTENTION = 6;

export class KvOps extends MoeOps {
  /** Writes each row's k and v ([rows][nKvHeads][headDim]) at its position's cache slot. */
  kvStore(
    l: KvLayout,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
    k: Operand,
    v: Operand,
  ): void {
    const [rows, pk, pv] = this.#caches("kvStore", l, kCache, vCache, sequences, positions);
    const bytes = rows * l.nKvHeads * l.headDim * 4;
    const pkr = this.addr("kvStore", "k", k, bytes), pvr = this.addr("kvStore", "v", v, bytes);
    this.push("kvStore", OP_KV_STORE, [
      pk,
      pv,
      l.type,
      l.blockSize,
      ...this.#copySequences(sequences, positions, rows),
      l.nKvHeads,
      l.headDim,
      pkr,
      pvr,
    ]);
  }

  /** Causal GQA attention of q ([rows][nHeads][headDim]): each row over its sequence's
   * cached positions 0..positions[row]; out has q's shape. */
  attention(
    l: KvLayout,
    out: Operand,
    q: Operand,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
    nHeads: number,
    scale: number,
    window = 0,
  ): void {
    checkDims("attention", { nHeads });
    if (!(Number.isSafeInteger(window) && window >= 0)) {
      throw new CpuKernelError("cpu_kernel_invalid", `attention: window ${window}`);
    }
    if (nHeads % l.nKvHeads !== 0) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `attention: ${nHeads} heads over ${l.nKvHeads} kv heads`,
      );
    }
    const [rows, pk, pv] = this.#caches("attention", l, kCache, vCache, sequences, positions);
    const qBytes = rows * nHeads * l.headDim * 4;
    const po = this.addr("attention", "out", out, qBytes);
    const pq = this.addr("attention", "q", q, qBytes);
    this.push("attention", OP_ATTENTION, [
      po,
      pq,
      pk,
      pv,
      l.type,
      l.blockSize,
      ...this.#copySequences(sequences, positions, rows),
      nHeads,
      l.nKvHeads,
      l.headDim,
      scale,
      window,
    ]);
  }

  /** The rows the sequences span and the addresses of both caches, all checked. */
  #caches(
    op: string,
    l: KvLayout,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
  ): [number, number, number] {
    checkDims(op, {
      nBlocks: l.nBlocks,
      blockSize: l.blockSize,
      nKvHeads: l.nKvHeads,
      headDim: l.headDim,
    });
    const rows = checkSequences(op, l, sequences, positions);
    this.traceCheck(l, (s) => checkSequences(op, l, s.layout.sequences, s.layout.positions));
    const bytes = kvLayoutBytes(l);
    return [rows, this.addr(op, "kCache", kCache, bytes), this.addr(op, "vCache", vCache, bytes)];
  }

  /** The sequence count, then the (row_start, row_count, table_len) triples, the tables
   * and the positions as offsets into the copied integers. */
  #copySequences(
    sequences: readonly KvSequence[],
    positions: Int32Array,
    rows: number,
  ): [number, number, number, number] {
    return this.copyOnce([sequences, positions, rows], () => {
      const seqs = this.copySequenceTriples(sequences);
      const tables = this.intsUsed;
      for (const s of sequences) this.copyInts(s.blockTable, s.blockTable.length);
      return [sequences.length, seqs, tables, this.copyInts(positions, rows)];
    });
  }
}
