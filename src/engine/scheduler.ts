/**
 * Decides what runs in each step (continuous batching, as vLLM made standard):
 *
 * 1. every decoding sequence feeds its last token (they are never starved);
 * 2. waiting requests are admitted in arrival order while there are sequence slots and
 *    cache blocks for their prompt, reusing any cached prefix;
 * 3. prompts are fed in chunks, shortest remaining first, each as large as the step's
 *    time allows (step_budget.ts sizes them so a step takes a bounded time), so nobody's
 *    next token waits behind a long prefill.
 *
 * Cache blocks are taken as positions are reached. When the pool runs dry, the most
 * recently admitted sequence is preempted: its blocks are released and it goes back to the
 * head of the queue, to recompute its tokens when readmitted (much of which the prefix
 * cache usually still holds).
 */

import { blockKey, type BlockPool } from "./kv/block_pool.ts";
import type { Sequence } from "./sequence.ts";
import { type ChunkSizer, stepWork } from "./step_budget.ts";

export interface SchedulerOptions {
  /** Sequences decoded together at most. */
  maxSequences: number;
  /** Copies the first `rows` positions of cache block `from` into block `to`. Without it,
   * prefixes are reused by whole blocks only. */
  copyRows?: (from: number, to: number, rows: number) => void;
  /**
   * Steps take as many whole prompts as their time allows: no first token is due that a
   * prompt joining the step would delay (an engine that only pools prompts).
   */
  packPrompts?: boolean;
}

/** One sequence's share of a step: tokens [start, start + count) of its `tokens`. */
export interface ScheduledRun {
  seq: Sequence;
  start: number;
  count: number;
  /** The run reaches the sequence's last token: its logits pick the next token. */
  sample: boolean;
  /**
   * Drafted tokens fed after the last one (speculative decoding): the run's `count`
   * includes them, and every one of its rows is verified.
   */
  draft: number[];
}

/** A prefill that completes in a step leaves at least this many tokens of that step to
 * other prompts that complete with it. */
const LATENCY_FLOOR_TOKENS = 32;

export class Scheduler {
  waiting: Sequence[] = [];
  running: Sequence[] = [];
  preemptions = 0;

  constructor(readonly pool: BlockPool, readonly options: SchedulerOptions) {}

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  enqueue(seq: Sequence): void {
    this.waiting.push(seq);
  }

  /** Queues a sequence ahead of the others (a forked choice that must run its prompt's end). */
  enqueueFirst(seq: Sequence): void {
    this.waiting.unshift(seq);
  }

  /** Runs a sequence that already holds its cache blocks (a choice forked at its prompt's end). */
  adopt(seq: Sequence): void {
    this.running.push(seq);
  }

  /** Takes a sequence out wherever it is and releases its blocks. */
  remove(seq: Sequence): void {
    this.waiting = this.waiting.filter((s) => s !== seq);
    this.running = this.running.filter((s) => s !== seq);
    this.#releaseBlocks(seq);
  }

  /** Plans the next step: every decode, then prompt chunks as large as `sizer` allows. */
  schedule(sizer: ChunkSizer): ScheduledRun[] {
    const runs: ScheduledRun[] = [];
    for (const seq of [...this.running]) {
      if (seq.prefilling || !this.running.includes(seq)) continue;
      if (this.#reserve(seq, seq.cached + 1, runs)) {
        const draft = this.#reserveDraft(seq);
        runs.push({ seq, start: seq.cached, count: 1 + draft.length, sample: true, draft });
      }
    }
    this.#admit();

    const prefilling = this.running.filter((s) => s.prefilling)
      .sort((a, b) => a.uncached - b.uncached);
    // Once a first token is due, only prompts that finish too may join, this many tokens
    // in all: a chunk of a long prompt would delay that token for nobody's gain.
    let completing = Infinity;
    let fedPrompt = false;
    for (const seq of prefilling) {
      if (!this.running.includes(seq)) continue;
      const wanted = Math.min(seq.uncached, seq.maxChunk);
      let count = Math.min(sizer.fit(stepWork(runs), seq.cached, wanted), completing);
      if (!fedPrompt) {
        // Progress for one prompt per step, whatever the time: a few tokens when decodes
        // already fill the step, so that no prompt starves behind them.
        const floor = runs.length > 0 ? sizer.minTokens : 1;
        count = Math.max(count, Math.min(wanted, floor));
      }
      if (count <= 0 || (completing !== Infinity && count < seq.uncached)) continue;
      if (!this.#reserve(seq, seq.cached + count, runs)) continue;
      const sample = count === seq.uncached;
      runs.push({ seq, start: seq.cached, count, sample, draft: [] });
      fedPrompt = true;
      if (completing !== Infinity) completing -= count;
      else if (sample && !this.options.packPrompts) {
        completing = Math.max(count, LATENCY_FLOOR_TOKENS);
      }
    }
    return runs;
  }

  /**
   * Records that a step ran: positions are cached, full blocks become reusable. A run's
   * drafted positions are not: `settle` takes those the verification accepted.
   */
  complete(runs: ScheduledRun[]): void {
    for (const { seq, start, count, draft } of runs) {
      seq.cached += count - draft.length;
      this.#register(seq, start);
    }
  }

  /**
   * A verification accepted the first `accepted` drafted tokens of `seq`'s run, which are
   * now its tokens: their positions are cached. Blocks taken only for the rest of the draft
   * go back to the pool; the rejected positions of a block kept are written over later.
   */
  settle(seq: Sequence, accepted: number): void {
    if (seq.finished) return;
    const start = seq.cached;
    seq.cached += accepted;
    this.#register(seq, start);
    const keep = this.pool.blocksFor(seq.cached + 1);
    while (seq.blocks.length > keep) this.pool.release(seq.blocks.pop()!);
  }

  /** Registers the full blocks of `seq`'s cached positions, and its reuse boundary's. */
  #register(seq: Sequence, start: number): void {
    const bs = this.pool.blockSize;
    const full = Math.floor(seq.cached / bs);
    for (let i = seq.keys.length; i < full; i++) {
      const tokens = seq.tokens.slice(i * bs, (i + 1) * bs);
      const key = blockKey(seq.keys[i - 1] ?? "", tokens);
      this.pool.register(seq.blocks[i], key, tokens);
      seq.keys.push(key);
    }
    // The block the reuse boundary falls in, by its tokens up to the boundary.
    const b = seq.reuseBoundary, i = Math.floor(b / bs);
    if (start < b && b <= seq.cached && b % bs !== 0) {
      this.pool.registerPartial(
        seq.blocks[i],
        seq.keys[i - 1] ?? "",
        seq.tokens.slice(i * bs, b),
      );
    }
  }

  /** Drops finished sequences and returns their blocks. */
  retire(): void {
    for (const seq of this.running) if (seq.finished) this.#releaseBlocks(seq);
    this.running = this.running.filter((s) => !s.finished);
    this.waiting = this.waiting.filter((s) => !s.finished);
  }

  /** Admits waiting sequences while slots and blocks allow, reusing cached prefixes. */
  #admit(): void {
    while (this.waiting.length > 0 && this.running.length < this.options.maxSequences) {
      const seq = this.waiting[0];
      this.#reusePrefix(seq);
      const needed = this.pool.blocksFor(seq.tokens.length) - seq.blocks.length;
      // Keep one block of headroom per running sequence for its next decode step.
      if (needed + this.running.length > this.pool.available && this.running.length > 0) {
        this.#releaseBlocks(seq);
        return;
      }
      this.waiting.shift();
      this.running.push(seq);
    }
  }

  /** Takes holds on the cached blocks that match the start of the sequence's tokens. */
  #reusePrefix(seq: Sequence): void {
    const bs = this.pool.blockSize;
    // At least the last token must run, to produce the logits of the next one.
    const reusable = seq.reusesPrefix ? Math.floor((seq.tokens.length - 1) / bs) : 0;
    while (seq.blocks.length < reusable) {
      const i = seq.blocks.length;
      const tokens = seq.tokens.slice(i * bs, (i + 1) * bs);
      const key = blockKey(seq.keys[i - 1] ?? "", tokens);
      const block = this.pool.lookup(key, tokens);
      if (block === null) break;
      this.pool.retain(block);
      seq.blocks.push(block);
      seq.keys.push(key);
    }
    seq.cached = seq.blocks.length * bs;
    this.#reusePartial(seq);
    if (seq.reusedTokens < 0) seq.reusedTokens = seq.cached;
  }

  /** Copies the first tokens of a cached block that continue the reused whole blocks (an
   * earlier prompt's reuse boundary) into a block of the sequence's own. Only after a whole
   * block matched: a few tokens of a short prompt are not worth a copy. */
  #reusePartial(seq: Sequence): void {
    const copyRows = this.options.copyRows;
    const bs = this.pool.blockSize, i = seq.blocks.length, start = i * bs;
    if (copyRows === undefined || i === 0 || !seq.reusesPrefix) return;
    const most = Math.min(bs - 1, seq.tokens.length - 1 - start);
    if (most <= 0) return;
    const next = seq.tokens.slice(start, start + most);
    const hit = this.pool.lookupPartial(seq.keys[i - 1] ?? "", next, most);
    if (hit === null) return;
    // Held while a block is found for the copy, so that it cannot be the one evicted.
    this.pool.retain(hit.block);
    const own = this.pool.allocate();
    if (own !== null) {
      copyRows(hit.block, own, hit.count);
      seq.blocks.push(own);
      seq.cached = start + hit.count;
    }
    this.pool.release(hit.block);
  }

  /**
   * Makes sure `seq` holds blocks for `positions` positions, preempting the youngest
   * running sequences when the pool is dry. False when `seq` itself had to give way.
   */
  #reserve(seq: Sequence, positions: number, runs: ScheduledRun[]): boolean {
    while (seq.blocks.length < this.pool.blocksFor(positions)) {
      const block = this.pool.allocate();
      if (block !== null) {
        seq.blocks.push(block);
        continue;
      }
      const victim = this.running.at(-1)!;
      this.#preempt(victim, runs);
      if (victim === seq) return false;
    }
    return true;
  }

  /**
   * The part of `seq`'s draft its blocks can hold, taking free blocks for it but never
   * preempting anyone: a draft is a bet, not a need.
   */
  #reserveDraft(seq: Sequence): number[] {
    const draft = seq.draft;
    seq.draft = [];
    const last = seq.cached + 1 + draft.length;
    // Blocks a draft of an interrupted step took, past what this one needs.
    while (seq.blocks.length > this.pool.blocksFor(last)) {
      this.pool.release(seq.blocks.pop()!);
    }
    while (seq.blocks.length < this.pool.blocksFor(last)) {
      const block = this.pool.allocate();
      if (block === null) break;
      seq.blocks.push(block);
    }
    return draft.slice(0, Math.max(0, seq.blocks.length * this.pool.blockSize - seq.cached - 1));
  }

  #preempt(seq: Sequence, runs: ScheduledRun[]): void {
    this.preemptions++;
    this.#releaseBlocks(seq);
    this.running = this.running.filter((s) => s !== seq);
    this.waiting.unshift(seq);
    const i = runs.findIndex((r) => r.seq === seq);
    if (i !== -1) runs.splice(i, 1);
  }

  #releaseBlocks(seq: Sequence): void {
    for (const b of seq.blocks) this.pool.release(b);
    seq.blocks = [];
    seq.keys = [];
    seq.cached = 0;
  }
}
