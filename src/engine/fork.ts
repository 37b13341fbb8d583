/**
 * The choices of one request (n > 1) share one prefill: the first choice runs the prompt,
 * and at its end every other choice forks from it. A fork takes holds on the prompt's full
 * cache blocks (shared, never written again) and a copy of the block the prompt ends in
 * (each choice writes its own tokens after it), then samples its first token from the same
 * logits, with its own sampler stream.
 */

import type { BlockPool } from "./kv/block_pool.ts";
import type { Sequence } from "./sequence.ts";

/**
 * Gives `follower` the cache of `leader`'s prompt, which has just run. False when it
 * cannot: the prompt ends inside a block and the cache cannot copy part of a block (it is
 * spread over processes) or no block is free; the follower must then run the end of the
 * prompt itself, from the full blocks the prefix cache holds.
 */
export function shareCache(
  leader: Sequence,
  follower: Sequence,
  pool: BlockPool,
  copyRows: ((from: number, to: number, rows: number) => void) | undefined,
): boolean {
  const bs = pool.blockSize;
  const full = Math.floor(leader.cached / bs);
  const rest = leader.cached % bs;
  let own: number | null = null;
  if (rest > 0) {
    if (copyRows === undefined) return false;
    own = pool.allocate();
    if (own === null) return false;
    copyRows(leader.blocks[full], own, rest);
  }
  const shared = leader.blocks.slice(0, full);
  for (const block of shared) pool.retain(block);
  follower.blocks = own === null ? shared : [...shared, own];
  follower.keys = leader.keys.slice(0, full);
  follower.cached = leader.cached;
  follower.reusedTokens = leader.reusedTokens;
  return true;
}
