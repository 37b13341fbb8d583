/**
 * Draft-model drafting (llama.cpp's `-md`, vLLM's draft models): a smaller model of the same
 * vocabulary runs k greedy steps ahead of the target for every sequence that asks, batched
 * over them, and its tokens are the drafts the target verifies. Its drafts are
 * deterministic (q is a point mass), so verification is the engine's one rule for all
 * drafts.
 *
 * The draft model keeps a KV cache of its own (a pool of its own blocks, no prefix
 * sharing). A sequence's draft cache trails its tokens: each round first feeds what the
 * target took since (the prompt, the first time; a round's catch-up is bounded, so a long
 * prompt takes a few steps before drafts start), then the drafted tokens one step at a
 * time. Positions of drafted tokens the target refused are simply fed again later.
 */

import type { Step } from "../../backend/backend.ts";
import type { ModelRunner } from "../../runner/runner.ts";
import { BlockPool } from "../kv/block_pool.ts";
import type { Sequence } from "../sequence.ts";

interface DraftState {
  blocks: number[];
  /** Leading positions whose K/V hold the sequence's tokens. */
  cached: number;
  /** Tokens of the sequence when its last draft was made, until `settle` (-1: settled). */
  base: number;
}

/** One sequence's part of a draft model step. */
interface Feed {
  seq: Sequence;
  state: DraftState;
  ids: number[];
  start: number;
}

export class DraftModel {
  readonly #runner: ModelRunner;
  readonly #pool: BlockPool;
  readonly #states = new Map<Sequence, DraftState>();
  /** Tokens a round may feed to catch sequences up, all together. */
  readonly #catchUp: number;

  constructor(runner: ModelRunner, kv: { blockSize: number; nBlocks: number }, catchUp: number) {
    this.#runner = runner;
    this.#pool = new BlockPool(kv.nBlocks, kv.blockSize);
    this.#catchUp = catchUp;
  }

  /**
   * Drafts up to `wants.get(seq)` tokens for each sequence: none for one still catching up
   * or that the draft pool has no room for.
   */
  draft(wants: ReadonlyMap<Sequence, number>): Map<Sequence, number[]> {
    const drafts = new Map<Sequence, number[]>();
    let budget = this.#catchUp;
    let round: Feed[] = [];
    for (const [seq, k] of wants) {
      const state = this.#state(seq);
      const length = seq.tokens.length;
      const behind = length - state.cached;
      if (k <= 0 || behind > budget || !this.#reserve(state, length + k - 1)) {
        // Progress for a sequence far behind (its last token is fed with its first draft).
        const count = Math.min(behind - 1, budget);
        if (count > 0 && this.#reserve(state, state.cached + count)) {
          const ids = seq.tokens.slice(state.cached, state.cached + count);
          round.push({ seq, state, ids, start: state.cached });
          budget -= count;
        }
        continue;
      }
      budget -= behind;
      state.base = length;
      drafts.set(seq, []);
      round.push({ seq, state, ids: seq.tokens.slice(state.cached), start: state.cached });
    }
    while (round.length > 0) {
      const picks = this.#forward(round);
      round = [];
      for (const [feed, token] of picks) {
        const draft = drafts.get(feed.seq)!;
        draft.push(token);
        if (draft.length < wants.get(feed.seq)!) {
          round.push({ ...feed, ids: [token], start: feed.state.cached });
        }
      }
    }
    return drafts;
  }

  /** The target took `accepted` of `seq`'s drafted tokens: the rest leave the draft cache. */
  settle(seq: Sequence, accepted: number): void {
    const state = this.#states.get(seq);
    if (state === undefined || state.base < 0) return;
    state.cached = Math.min(state.cached, state.base + accepted);
    state.base = -1;
  }

  /** Forgets every sequence but `live` (finished, cancelled, preempted), freeing blocks. */
  keep(live: ReadonlySet<Sequence>): void {
    for (const [seq, state] of this.#states) {
      if (live.has(seq)) continue;
      for (const b of state.blocks) this.#pool.release(b);
      this.#states.delete(seq);
    }
  }

  #state(seq: Sequence): DraftState {
    let state = this.#states.get(seq);
    if (state === undefined) {
      state = { blocks: [], cached: 0, base: -1 };
      this.#states.set(seq, state);
    }
    // A draft never verified (its step stopped, or the sequence gave way): only the
    // positions before it hold the sequence's tokens.
    if (state.base >= 0) state.cached = Math.min(state.cached, state.base);
    state.base = -1;
    return state;
  }

  /** Blocks for `positions` positions; false when the pool is dry. */
  #reserve(state: DraftState, positions: number): boolean {
    while (state.blocks.length < this.#pool.blocksFor(positions)) {
      const block = this.#pool.allocate();
      if (block === null) return false;
      state.blocks.push(block);
    }
    return true;
  }

  /** One step of the draft model over `feeds`; the next token of each that drafts. */
  #forward(feeds: Feed[]): Array<[Feed, number]> {
    const ids: number[] = [];
    const positions: number[] = [];
    const sequences = [];
    const rows: number[] = [];
    const fed: Feed[] = [];
    for (const feed of feeds) {
      const rowStart = ids.length;
      feed.ids.forEach((id, i) => (ids.push(id), positions.push(feed.start + i)));
      sequences.push({
        rowStart,
        rowCount: feed.ids.length,
        blockTable: Int32Array.from(feed.state.blocks),
      });
      feed.state.cached = feed.start + feed.ids.length;
      // A row for every feed, read or not: a step of no output rows is not every backend's.
      rows.push(ids.length - 1);
      fed.push(feed);
    }
    const step: Step = {
      ids: Int32Array.from(ids),
      layout: { positions: Int32Array.from(positions), sequences },
      logitRows: Int32Array.from(rows),
    };
    const argmax = this.#runner.forwardArgmax(step)!;
    return fed.flatMap((feed, i): Array<[Feed, number]> =>
      feed.state.base >= 0 ? [[feed, argmax[i]]] : []
    );
  }
}
