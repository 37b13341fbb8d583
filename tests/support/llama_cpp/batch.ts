/**
 * llama_batch built in JavaScript memory and passed by value to llama_decode, and float
 * results copied out of llama.cpp's buffers.
 */

import { BATCH_FIELDS, BATCH_SIZE } from "./abi.ts";
import { LlamaRefError } from "./errors.ts";
import type { LlamaSymbols } from "./library.ts";

/** The address of `buf`'s first byte, for pointers stored inside a struct. */
export function address(buf: ArrayBufferView): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf as BufferSource)));
}

const pinned: ArrayBufferView[][] = [];

/**
 * Runs `call` with `arrays` held from module scope: a struct that only points at them
 * does not keep them alive, and llama.cpp's log callback runs JavaScript (so possibly a
 * garbage collection) in the middle of a call.
 */
export function withPinned<T>(arrays: ArrayBufferView[], call: () => T): T {
  pinned.push(arrays);
  try {
    return call();
  } finally {
    pinned.pop();
  }
}

/**
 * llama_decode of `tokens` at positions start.., sequence 0, with logits for every
 * position or only the last; returns llama_decode's result.
 */
export function decode(
  sym: LlamaSymbols,
  ctx: NonNullable<Deno.PointerValue>,
  tokens: readonly number[],
  start: number,
  allOutputs: boolean,
): number {
  const n = tokens.length;
  // Arrays over their own ArrayBuffer never move, so the addresses hold through the call.
  const token = new Int32Array(new ArrayBuffer(n * 4));
  const pos = new Int32Array(new ArrayBuffer(n * 4));
  const nSeqId = new Int32Array(new ArrayBuffer(n * 4));
  const seq0 = new Int32Array(new ArrayBuffer(4));
  const seqIds = new BigUint64Array(new ArrayBuffer(n * 8));
  const outputs = new Int8Array(new ArrayBuffer(n));
  const seq0Address = address(seq0);
  for (let i = 0; i < n; i++) {
    token[i] = tokens[i];
    pos[i] = start + i;
    nSeqId[i] = 1;
    seqIds[i] = seq0Address;
    outputs[i] = allOutputs || i === n - 1 ? 1 : 0;
  }
  const bytes = new Uint8Array(BATCH_SIZE);
  const view = new DataView(bytes.buffer);
  view.setInt32(BATCH_FIELDS.n_tokens, n, true);
  view.setBigUint64(BATCH_FIELDS.token, address(token), true);
  view.setBigUint64(BATCH_FIELDS.embd, 0n, true);
  view.setBigUint64(BATCH_FIELDS.pos, address(pos), true);
  view.setBigUint64(BATCH_FIELDS.n_seq_id, address(nSeqId), true);
  view.setBigUint64(BATCH_FIELDS.seq_id, address(seqIds), true);
  view.setBigUint64(BATCH_FIELDS.logits, address(outputs), true);
  const arrays = [token, pos, nSeqId, seq0, seqIds, outputs];
  return withPinned(arrays, () => sym.llama_decode(ctx, bytes));
}

/**
 * llama_decode of several sequences in one batch: sequence s (id s) at positions 0.., every
 * token an output (pooled embeddings read them all); returns llama_decode's result.
 */
export function decodeSequences(
  sym: LlamaSymbols,
  ctx: NonNullable<Deno.PointerValue>,
  sequences: readonly (readonly number[])[],
): number {
  const n = sequences.reduce((total, s) => total + s.length, 0);
  const token = new Int32Array(new ArrayBuffer(n * 4));
  const pos = new Int32Array(new ArrayBuffer(n * 4));
  const nSeqId = new Int32Array(new ArrayBuffer(n * 4));
  const ids = new Int32Array(new ArrayBuffer(sequences.length * 4));
  const seqIds = new BigUint64Array(new ArrayBuffer(n * 8));
  const outputs = new Int8Array(new ArrayBuffer(n));
  let i = 0;
  sequences.forEach((tokens, s) => {
    ids[s] = s;
    const idAddress = address(ids.subarray(s, s + 1));
    tokens.forEach((t, p) => {
      token[i] = t;
      pos[i] = p;
      nSeqId[i] = 1;
      seqIds[i] = idAddress;
      outputs[i] = 1;
      i++;
    });
  });
  const bytes = new Uint8Array(BATCH_SIZE);
  const view = new DataView(bytes.buffer);
  view.setInt32(BATCH_FIELDS.n_tokens, n, true);
  view.setBigUint64(BATCH_FIELDS.token, address(token), true);
  view.setBigUint64(BATCH_FIELDS.embd, 0n, true);
  view.setBigUint64(BATCH_FIELDS.pos, address(pos), true);
  view.setBigUint64(BATCH_FIELDS.n_seq_id, address(nSeqId), true);
  view.setBigUint64(BATCH_FIELDS.seq_id, address(seqIds), true);
  view.setBigUint64(BATCH_FIELDS.logits, address(outputs), true);
  return withPinned([token, pos, nSeqId, ids, seqIds, outputs], () => sym.llama_decode(ctx, bytes));
}

/** A copy of `n` floats at `ptr` (llama.cpp's logits or embeddings). */
export function floats(ptr: Deno.PointerValue, n: number, what: string): Float32Array {
  if (ptr === null) throw new LlamaRefError("llama_ref_unsupported", `llama.cpp has no ${what}`);
  return new Float32Array(Deno.UnsafePointerView.getArrayBuffer(ptr, n * 4)).slice();
}
