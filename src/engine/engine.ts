/**
 * The engine core of one loaded model, on token ids only. It owns the KV cache's block
 * pool and the running sequences, and advances them one step at a time: each step feeds
 * every decoding sequence its last token plus a chunk of a waiting prompt, in one forward
 * pass of its runner, then samples for every sequence that produced logits. Text is the
 * front end's; the runner (runner/) is handed in, whatever device or split it runs on.
 */

import type { SequenceSlice, Step, StepInterrupt } from "../backend/backend.ts";
import { NeuronError } from "../common/errors.ts";
import type { ModelRunner } from "../runner/runner.ts";
import { EngineError } from "./errors.ts";
import { BlockPool } from "./kv/block_pool.ts";
import type { EngineOptions, EngineRequest, EngineStats, SequenceObserver } from "./request.ts";
import { type SampledToken, topIds } from "./sampler.ts";
import { Scheduler } from "./scheduler.ts";
import { Sequence } from "./sequence.ts";
import { StepBudget, stepWork } from "./step_budget.ts";

/**
 * A sequence's next token and the raw top logits it asked to see; no token when its
 * constraint allows none (its output is complete) or failed (`fault`).
 */
interface Pick {
  token: SampledToken | null;
  top?: Array<[number, number]>;
  fault?: { code: string; message: string };
}
/** How long a step may take when it carries prompt chunks (see step_budget.ts). */
const DEFAULT_STEP_TARGET_MS = 150;
const MIN_STEP_TOKENS = 16;

export class Engine {
  readonly #runner: ModelRunner;
  readonly #pool: BlockPool;
  readonly #scheduler: Scheduler;
  readonly #budget: StepBudget;
  readonly #contextLength: number;
  /** The last step stopped early (see `step`). */
  #interrupted = false;
  readonly #stats = {
    prefillTokens: 0,
    prefillSeconds: 0,
    decodeTokens: 0,
    decodeSeconds: 0,
    steps: 0,
    stepTokens: 0,
    interruptedSteps: 0,
  };

  constructor(runner: ModelRunner, options: EngineOptions) {
    this.#runner = runner;
    this.#pool = new BlockPool(options.kv.nBlocks, options.kv.blockSize);
    this.#contextLength = options.contextLength;
    this.#scheduler = new Scheduler(this.#pool, {
      maxSequences: Math.max(1, options.maxSequences),
      copyRows: runner.copyKvRows,
    });
    this.#budget = new StepBudget(
      options.stepTargetMs ?? DEFAULT_STEP_TARGET_MS,
      Math.min(MIN_STEP_TOKENS, options.maxBatchTokens),
      options.maxBatchTokens,
    );
  }

  get hasWork(): boolean {
    return this.#scheduler.hasWork;
  }

  /**
   * Validates and queues a request; `observer` hears its tokens. Errors (an empty prompt,
   * ids outside the vocabulary, a prompt too long) are thrown here, before anything runs.
   */
  submit(request: EngineRequest, observer: SequenceObserver): void {
    const ids = request.prompt;
    if (ids.length === 0) throw new EngineError("invalid_request", "the prompt is empty");
    const vocabSize = this.#runner.shape.vocabSize;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new EngineError("invalid_request", `token id ${id} is outside the vocabulary`);
      }
    }
    const room = this.#contextLength - ids.length;
    const asked = request.maxTokens;
    if (room <= 0 || (asked !== undefined && asked > room)) {
      throw new EngineError(
        "context_length_exceeded",
        `this model's maximum context length is ${this.#contextLength} tokens; the prompt has ` +
          `${ids.length} tokens` + (asked !== undefined ? ` and ${asked} more were requested` : ""),
      );
    }
    this.#scheduler.enqueue(new Sequence(request, asked ?? room, vocabSize, observer));
  }

  /** Stops a request (queued or running) and frees its cache blocks. */
  cancel(id: string): void {
    const seq = [...this.#scheduler.waiting, ...this.#scheduler.running].find((s) => s.id === id);
    if (!seq) return;
    seq.finish("cancelled");
    this.#scheduler.remove(seq);
  }

  /** Fails every request with an error (a step that could not run). */
  failAll(code: string, message: string): void {
    for (const s of this.#all()) s.fail(code, message);
    this.#scheduler.retire();
  }

  /** Ends every request (unload, shutdown). */
  cancelAll(): void {
    for (const s of this.#all()) s.finish("cancelled");
    this.#scheduler.retire();
  }

  /**
   * Runs one forward pass over the scheduled tokens and samples where due. A step that
   * feeds prompt chunks (the long kind) stops early when `interrupt` fires: a request that
   * arrives during a long prefill then waits for part of a layer, not for the rest of the
   * step. Nothing was sampled or recorded as cached, so the next step, which carries the
   * new request, simply feeds those tokens again. The step after an interrupted one always
   * runs whole, so that a stream of arrivals cannot stall everyone else.
   */
  step(interrupt?: StepInterrupt): void {
    const runs = this.#scheduler.schedule(this.#budget);
    if (runs.length === 0) return;

    const ids: number[] = [];
    const positions: number[] = [];
    const slices: SequenceSlice[] = [];
    const logitRows: number[] = [];
    let prefill = 0;
    for (const run of runs) {
      const rowStart = ids.length;
      for (let i = 0; i < run.count; i++) {
        ids.push(run.seq.tokens[run.start + i]);
        positions.push(run.start + i);
      }
      if (run.seq.prefilling) prefill += run.count;
      if (run.sample) logitRows.push(ids.length - 1);
      slices.push({ rowStart, rowCount: run.count, blockTable: Int32Array.from(run.seq.blocks) });
    }

    const step: Step = {
      ids: Int32Array.from(ids),
      layout: { positions: Int32Array.from(positions), sequences: slices },
      logitRows: Int32Array.from(logitRows),
    };
    const sampling = runs.filter((r) => r.sample).map((r) => r.seq);
    const started = performance.now();
    const stoppable = prefill > 0 && !this.#interrupted;
    const picks = this.#run(step, sampling, stoppable ? interrupt : undefined);
    this.#interrupted = picks === null;
    if (picks === null) {
      this.#stats.interruptedSteps++;
      return;
    }
    const seconds = (performance.now() - started) / 1000;
    this.#account(prefill, ids.length - prefill, seconds);
    this.#budget.observe(stepWork(runs), seconds);
    this.#scheduler.complete(runs);
    sampling.forEach((seq, i) => {
      const { token, top, fault } = picks[i];
      if (fault) seq.fail(fault.code, fault.message);
      else if (token === null) seq.finish("stop");
      else seq.onToken(token, top);
    });
    this.#scheduler.retire();
  }

  stats(): EngineStats {
    const { steps, stepTokens, ...timing } = this.#stats;
    const prefix = this.#pool.prefixStats;
    return {
      running: this.#scheduler.running.length,
      waiting: this.#scheduler.waiting.length,
      kvBlocksUsed: this.#pool.held,
      kvBlocksFree: this.#pool.available,
      kvBlocksCached: this.#pool.cached,
      prefixLookups: prefix.lookups,
      prefixHits: prefix.hits,
      preemptions: this.#scheduler.preemptions,
      steps,
      meanBatchTokens: steps === 0 ? 0 : stepTokens / steps,
      ...timing,
    };
  }

  /** The step's forward pass and each sampling sequence's pick; null when interrupted. */
  #run(step: Step, sampling: Sequence[], interrupt?: StepInterrupt): Pick[] | null {
    const argmaxOnly = sampling.every((seq) =>
      seq.sampler.plainGreedy && seq.topLogits === 0 && seq.filter === undefined
    );
    if (argmaxOnly) {
      const ids = this.#runner.forwardArgmax(step, interrupt);
      return ids && Array.from(ids, (id): Pick => ({ token: { id } }));
    }
    const logits = this.#runner.forward(step, interrupt);
    return logits && this.#sample(logits, sampling);
  }

  /**
   * Samples each sequence's token from its row of `rows`. A constraint that fails (past
   * its bounds) fails its own sequence only.
   */
  #sample(rows: Float32Array, sampling: Sequence[]): Pick[] {
    const vocab = this.#runner.shape.vocabSize;
    return sampling.map((seq, i): Pick => {
      const logits = rows.subarray(i * vocab, (i + 1) * vocab);
      const top = seq.topLogits > 0
        ? topIds(logits, seq.topLogits).map((id): [number, number] => [id, logits[id]])
        : undefined;
      try {
        return { token: seq.sampler.sample(logits, seq.filter), top };
      } catch (err) {
        if (!(err instanceof NeuronError)) throw err;
        return { token: null, fault: { code: err.code, message: err.message } };
      }
    });
  }

  #all(): Sequence[] {
    return [...this.#scheduler.waiting, ...this.#scheduler.running];
  }

  #account(prefill: number, decode: number, seconds: number): void {
    const total = prefill + decode;
    if (total === 0) return;
    this.#stats.steps++;
    this.#stats.stepTokens += total;
    this.#stats.prefillTokens += prefill;
    this.#stats.prefillSeconds += (seconds * prefill) / total;
    this.#stats.decodeTokens += decode;
    this.#stats.decodeSeconds += (seconds * decode) / total;
  }
}
