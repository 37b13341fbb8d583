/**
 * A step as it crosses from the leader to its workers: the engine's batch (tokens, per-row
 * positions, per-sequence rows and block tables) to a `generate_step` request and back,
 * with every index checked on the way in, since the kernels trust them.
 */

import type { KvPoolSpec, SequenceSlice, Step, StepLayout } from "../backend/backend.ts";
import { TpError } from "./errors.ts";
import type { RequestOf } from "./protocol.ts";

export type GenerateStep = RequestOf<"generate_step">;

/**
 * The request for a step. Block tables are cut to the blocks the step's positions reach:
 * a sequence's later blocks hold nothing yet.
 */
export function stepRequest(
  modelId: string,
  ids: Int32Array,
  layout: StepLayout,
  blockSize: number,
): GenerateStep {
  return {
    op: "generate_step",
    model_id: modelId,
    tokens: Array.from(ids),
    offset: layout.positions[0] ?? 0,
    positions: Array.from(layout.positions),
    sequences: layout.sequences.map((s) => {
      let last = 0;
      for (let r = s.rowStart; r < s.rowStart + s.rowCount; r++) {
        last = Math.max(last, layout.positions[r]);
      }
      return {
        row_start: s.rowStart,
        row_count: s.rowCount,
        block_table: Array.from(s.blockTable.subarray(0, Math.floor(last / blockSize) + 1)),
      };
    }),
  };
}

function bad(message: string): TpError {
  return new TpError("bad_request", `generate_step: ${message}`);
}

/**
 * The step of a request (workers compute no logits), or `bad_request` naming the first
 * index out of range.
 */
export function stepFromRequest(
  req: GenerateStep,
  vocabSize: number,
  kv: Pick<KvPoolSpec, "blockSize" | "nBlocks">,
): Step {
  const n = req.tokens.length;
  const ids = Int32Array.from(req.tokens);
  const outside = ids.findIndex((id) => id >= vocabSize);
  if (outside >= 0) throw bad(`token ${ids[outside]} at ${outside} is outside the vocabulary`);
  const positions = req.positions
    ? Int32Array.from(req.positions)
    : Int32Array.from({ length: n }, (_, i) => req.offset + i);
  if (positions.length !== n) {
    throw bad(`${positions.length} positions for ${n} tokens`);
  }
  const top = Math.max(...positions);
  const wire = req.sequences ?? [{
    row_start: 0,
    row_count: n,
    block_table: Array.from({ length: Math.floor(top / kv.blockSize) + 1 }, (_, i) => i),
  }];
  let next = 0;
  const sequences: SequenceSlice[] = wire.map((s, i) => {
    if (s.row_start !== next || s.row_start + s.row_count > n) {
      throw bad(
        `sequence ${i} covers rows ${s.row_start}..${s.row_start + s.row_count - 1}, ` +
          `expected to start at ${next} and end by ${n - 1}`,
      );
    }
    next = s.row_start + s.row_count;
    const badBlock = s.block_table.findIndex((b) => b >= kv.nBlocks);
    if (badBlock >= 0) {
      throw bad(`sequence ${i}: block ${s.block_table[badBlock]} of a ${kv.nBlocks}-block pool`);
    }
    for (let r = s.row_start; r < next; r++) {
      if (Math.floor(positions[r] / kv.blockSize) >= s.block_table.length) {
        throw bad(
          `sequence ${i}: position ${positions[r]} is past its ${s.block_table.length} ` +
            `blocks of ${kv.blockSize}`,
        );
      }
    }
    return {
      rowStart: s.row_start,
      rowCount: s.row_count,
      blockTable: Int32Array.from(s.block_table),
    };
  });
  if (next !== n) throw bad(`the sequences cover ${next} of ${n} rows`);
  return { ids, layout: { positions, sequences }, logitRows: new Int32Array(0) };
}
