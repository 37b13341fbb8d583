/**
 * The engine core of one loaded model, on token ids only. It owns the KV cache's block
 * pool and the running sequences, and advances them one step at a time: each step feeds
 * every decoding sequence its last token (and any tokens drafted after it, spec/) plus a
 * chunk of a waiting prompt, in one forward pass of its runner, then samples for every
 * sequence that produced logits. Text is the front end's; the runner (runner/) is handed
 * in, whatever device or split it runs on.
 */

import type { SequenceSlice, Step, StepInterrupt } from "../backend/backend.ts";
import { NeuronError } from "../common/errors.ts";
import type { ModelRunner } from "../runner/runner.ts";
import { EngineError } from "./errors.ts";
import { drawAhead } from "./draw_ahead.ts";
import { shareCache } from "./fork.ts";
import { BlockPool } from "./kv/block_pool.ts";
import type { EngineOptions, EngineRequest, EngineStats, SequenceObserver } from "./request.ts";
import { StepCounters } from "./step_counters.ts";
import { type SampledToken, topIds } from "./sampler.ts";
import { type ScheduledRun, Scheduler } from "./scheduler.ts";
import { Sequence } from "./sequence.ts";
import { DraftModel } from "./spec/draft_model.ts";
import { planDrafts } from "./spec/drafting.ts";
import { resolveSpeculation, type SpeculativeParams } from "./spec/speculation.ts";
import { StepBudget, stepWork } from "./step_budget.ts";
import { StepRows } from "./step_rows.ts";

/**
 * A sequence's next token and the raw top logits it asked to see; no token when its
 * constraint allows none (its output is complete) or failed (`fault`).
 */
interface Pick {
  token: SampledToken | null;
  top?: Array<[number, number]>;
  fault?: { code: string; message: string };
}

/** A run of a step and how many output rows it asked for (in step order). */
interface RunOutputs {
  run: ScheduledRun;
  rows: number;
}

/** What a step's forward pass gave back: each output row, or only each row's argmax. */
type StepResult = { rows: Float32Array } | { argmax: Int32Array };

/** How long a step may take when it carries prompt chunks (see step_budget.ts). */
const DEFAULT_STEP_TARGET_MS = 150;
const MIN_STEP_TOKENS = 16;

export class Engine {
  readonly #runner: ModelRunner;
  readonly #pool: BlockPool;
  readonly #scheduler: Scheduler;
  readonly #budget: StepBudget;
  readonly #contextLength: number;
  /** Steps return hidden states to pool (EngineOptions.hidden). */
  readonly #hidden: boolean;
  /** The last step stopped early (see `step`). */
  #interrupted = false;
  readonly #speculative: Partial<SpeculativeParams> | undefined;
  /** The draft model's side of speculation, when one was loaded with the model. */
  readonly #drafter: DraftModel | null;
  readonly #stats = new StepCounters();
  readonly #rows = new StepRows();

  constructor(runner: ModelRunner, options: EngineOptions) {
    this.#runner = runner;
    this.#pool = new BlockPool(options.kv.nBlocks, options.kv.blockSize);
    this.#contextLength = options.contextLength;
    this.#hidden = options.hidden ?? false;
    this.#speculative = options.speculative;
    const draft = options.draft;
    if (draft && draft.runner.shape.vocabSize !== runner.shape.vocabSize) {
      throw new EngineError(
        "invalid_request",
        `the draft model has ${draft.runner.shape.vocabSize} tokens, the model ` +
          `${runner.shape.vocabSize}: a draft model must share its vocabulary`,
      );
    }
    this.#drafter = draft ? new DraftModel(draft.runner, draft.kv, options.maxBatchTokens) : null;
    this.#scheduler = new Scheduler(this.#pool, {
      maxSequences: Math.max(1, options.maxSequences),
      copyRows: runner.copyKvRows,
      packPrompts: this.#hidden,
    });
    // Steps are timed to keep decoding streams flowing; a pooling engine has none, and its
    // throughput is that of full steps (a CPU reads every weight once per step).
    this.#budget = new StepBudget(
      this.#hidden ? Infinity : options.stepTargetMs ?? DEFAULT_STEP_TARGET_MS,
      Math.min(MIN_STEP_TOKENS, options.maxBatchTokens),
      options.maxBatchTokens,
    );
  }

  get hasWork(): boolean {
    return this.#scheduler.hasWork;
  }

  /**
   * Validates and queues a request; `observer` hears its tokens, or with several observers
   * each hears one choice, all sampled after one run of the prompt (fork.ts). Errors (an
   * empty prompt, ids outside the vocabulary, a prompt too long, a request this engine
   * does not serve) are thrown here, before anything runs.
   */
  submit(request: EngineRequest, observer: SequenceObserver | SequenceObserver[]): void {
    const observers = Array.isArray(observer) ? observer : [observer];
    const ids = request.prompt;
    if (ids.length === 0) throw new EngineError("invalid_request", "the prompt is empty");
    const pooled = request.pooling !== undefined;
    if (pooled !== this.#hidden) {
      throw new EngineError(
        "invalid_request",
        this.#hidden
          ? "this model pools hidden states: a request must ask for a pooling"
          : "this model generates: it does not pool hidden states",
      );
    }
    if (observers.length === 0 || (pooled && observers.length > 1)) {
      throw new EngineError("invalid_request", `${observers.length} choices cannot be made`);
    }
    const vocabSize = this.#runner.shape.vocabSize;
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new EngineError("invalid_request", `token id ${id} is outside the vocabulary`);
      }
    }
    const room = this.#contextLength - ids.length;
    const asked = pooled ? 0 : request.maxTokens;
    if ((asked ?? 1) > room) {
      throw new EngineError(
        "context_length_exceeded",
        `this model's maximum context length is ${this.#contextLength} tokens; the prompt has ` +
          `${ids.length} tokens` + (asked ? ` and ${asked} more were requested` : ""),
      );
    }
    const speculative = resolveSpeculation(this.#speculative, request.speculative);
    if (!pooled && speculative.mode === "draft" && this.#drafter === null) {
      throw new EngineError(
        "invalid_request",
        "speculative mode 'draft' needs a draft model, and this model was loaded without one",
      );
    }
    const [first, ...others] = observers.map((o, i) =>
      new Sequence(request, asked ?? room, vocabSize, o, i, speculative)
    );
    first.followers = others;
    this.#scheduler.enqueue(first);
  }

  /** Stops a request (queued or running, every choice of it) and frees its cache blocks. */
  cancel(id: string): void {
    for (const seq of this.#all().filter((s) => s.id === id)) {
      seq.finish("cancelled");
      this.#scheduler.remove(seq);
    }
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
   * runs whole, so that a stream of arrivals cannot stall everyone else. A pooling engine's
   * steps always run whole.
   */
  step(interrupt?: StepInterrupt): void {
    planDrafts(this.#scheduler.running, this.#contextLength, this.#drafter);
    const runs = this.#scheduler.schedule(this.#budget);
    if (runs.length === 0) return;

    const ids: number[] = [];
    const positions: number[] = [];
    const slices: SequenceSlice[] = [];
    const outRows: number[] = [];
    const outputs: RunOutputs[] = [];
    let prefill = 0;
    for (const run of runs) {
      const rowStart = ids.length;
      const fed = run.count - run.draft.length;
      for (let i = 0; i < run.count; i++) {
        ids.push(i < fed ? run.seq.tokens[run.start + i] : run.draft[i - fed]);
        positions.push(run.start + i);
      }
      if (run.seq.prefilling) prefill += run.count;
      // A verification needs every row: each drafted token is checked against the one before.
      const rows = run.draft.length > 0
        ? Array.from({ length: run.count }, (_, i) => i)
        : run.seq.outputRows(run.start, run.count, run.sample);
      for (const r of rows) outRows.push(rowStart + r);
      outputs.push({ run, rows: rows.length });
      slices.push({ rowStart, rowCount: run.count, blockTable: Int32Array.from(run.seq.blocks) });
    }

    const step: Step = {
      ids: Int32Array.from(ids),
      layout: { positions: Int32Array.from(positions), sequences: slices },
      logitRows: Int32Array.from(outRows),
      ...(this.#hidden ? { output: "hidden" as const } : {}),
    };
    const started = performance.now();
    // A pooling engine's arrivals only join the next step: stopping this one for them would
    // throw its work away for nobody's first token.
    const stoppable = prefill > 0 && !this.#interrupted && !this.#hidden;
    const result = this.#run(step, outputs, stoppable ? interrupt : undefined);
    this.#interrupted = result === null;
    if (result === null) {
      this.#stats.interruptedSteps++;
      return;
    }
    this.#budget.observe(stepWork(runs), (performance.now() - started) / 1000);
    this.#scheduler.complete(runs);
    const { specDrafted, specAccepted } = this.#stats;
    this.#deliver(outputs, result);
    const rejected = this.#stats.specDrafted - specDrafted -
      (this.#stats.specAccepted - specAccepted);
    // The step's time in the stats includes sampling its tokens: a decode speed is the
    // rate tokens come out at, constraint masks and all.
    this.#stats.step(prefill, ids.length - prefill, rejected, (performance.now() - started) / 1000);
    this.#scheduler.retire();
  }

  stats(): EngineStats {
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
      ...this.#stats.counts(),
    };
  }

  /** Values in an output row: hidden states when pooling, else logits. */
  get #rowWidth(): number {
    return this.#hidden ? this.#runner.shape.embeddingLength : this.#runner.shape.vocabSize;
  }

  /** The step's forward pass; null when interrupted. */
  #run(step: Step, outputs: RunOutputs[], interrupt?: StepInterrupt): StepResult | null {
    const masks = this.#hidden ? undefined : this.#argmaxMasks(outputs);
    if (masks !== undefined) {
      const masked = masks.some((m) => m !== null);
      const argmax = this.#runner.forwardArgmax(step, interrupt, masked ? masks : undefined);
      return argmax && { argmax };
    }
    const into = this.#rows.target(step.logitRows.length * this.#rowWidth);
    const rows = this.#runner.forward(step, interrupt, into);
    return rows && { rows };
  }

  /** Each output row's mask (null: free) when native argmax may pick every row; else undefined. */
  #argmaxMasks(outputs: RunOutputs[]): (Uint32Array | null)[] | undefined {
    const masks: (Uint32Array | null)[] = [];
    for (const { run, rows } of outputs) {
      if (rows === 0) continue;
      const own = run.seq.argmaxMasks(rows, run.draft.length > 0, this.#runner.shape.vocabSize);
      if (own === undefined) return undefined;
      masks.push(...own);
    }
    return masks;
  }

  /**
   * Hands each sequence its output rows: pooled and scored rows are taken, and where a
   * run reached its sequence's last token the next one is sampled (after forking the other
   * choices of its request, at the end of its prompt).
   */
  #deliver(outputs: RunOutputs[], result: StepResult): void {
    const width = this.#rowWidth;
    if ("rows" in result) drawAhead(this.#runner, outputs, result.rows, width);
    let r = 0;
    for (const { run, rows } of outputs) {
      const seq = run.seq;
      const first = r;
      r += rows;
      if (seq.finished) continue;
      if (run.draft.length > 0) {
        this.#verify(
          run,
          "argmax" in result
            ? (i) => ({ token: { id: result.argmax[first + i] } })
            : (i) =>
              this.#pick(seq, result.rows.subarray((first + i) * width, (first + i + 1) * width)),
        );
        continue;
      }
      if ("argmax" in result) {
        if (rows > 0 && seq.promptDone()) this.#take(seq, { token: { id: result.argmax[first] } });
        continue;
      }
      // Even without rows: a pooled prompt's last chunk ends it (first-token pooling).
      const out = Array.from(
        { length: rows },
        (_, i) => result.rows.subarray((first + i) * width, (first + i + 1) * width),
      );
      const logits = seq.takeOutputs(run.start, run.sample, out);
      if (logits === null) continue;
      const sample = seq.promptDone();
      this.#fork(seq, logits);
      if (!sample) continue;
      this.#take(seq, this.#pick(seq, logits));
    }
  }

  /**
   * Verifies a run's draft: row i is sampled exactly as a plain decode step would sample it
   * after the tokens taken so far (constraint, bias, penalties, seeded draw, log-probs, stop
   * tokens and strings, the token budget); while its token is the drafted one, the next row
   * is taken too. Rows after the first mismatch are dropped with their positions.
   * At temperature > 0 this is speculative sampling with a point-mass draft (q(d) = 1): d
   * is accepted with probability p(d) = min(1, p(d)/q(d)), else the token comes from p
   * without d, renormalised (the residual max(0, p - q)). The draw is plain decoding's own,
   * from the same seeded stream: a seed gives the same tokens with speculation or without.
   */
  #verify(run: ScheduledRun, row: (i: number) => Pick): void {
    const seq = run.seq;
    const k = run.draft.length;
    const before = seq.generated;
    let accepted = 0;
    for (let i = 0; i <= k; i++) {
      const pick = row(i);
      this.#take(seq, pick);
      const hit = i < k && pick.token?.id === run.draft[i];
      if (hit) accepted++;
      if (!hit || seq.finished) break;
    }
    this.#stats.verification(k, accepted, seq.generated - before);
    seq.speculation?.observe(k, accepted);
    if (seq.speculation?.source === "draft") this.#drafter?.settle(seq, accepted);
    this.#scheduler.settle(seq, accepted);
  }

  /** The other choices of `leader`'s request start from its prompt (fork.ts). */
  #fork(leader: Sequence, logits: Float32Array): void {
    for (const follower of leader.followers) {
      follower.sharePrompt(leader.promptScores);
      if (!follower.promptDone()) continue;
      if (!shareCache(leader, follower, this.#pool, this.#runner.copyKvRows)) {
        this.#scheduler.enqueueFirst(follower);
        continue;
      }
      this.#scheduler.adopt(follower);
      this.#take(follower, this.#pick(follower, logits));
    }
    leader.followers = [];
  }

  /**
   * Samples `seq`'s next token from `logits` under its constraint. A constraint that fails
   * (past its bounds) fails its own sequence only.
   */
  #pick(seq: Sequence, logits: Float32Array): Pick {
    const top = seq.topLogits > 0
      ? topIds(logits, seq.topLogits).map((id): [number, number] => [id, logits[id]])
      : undefined;
    try {
      return { token: seq.sampler.sample(logits, seq.filter), top };
    } catch (err) {
      if (!(err instanceof NeuronError)) throw err;
      return { token: null, fault: { code: err.code, message: err.message } };
    }
  }

  /** Hands `seq` its pick: a token, the end of its constrained output, or its failure. */
  #take(seq: Sequence, pick: Pick): void {
    if (pick.fault) seq.fail(pick.fault.code, pick.fault.message);
    else if (pick.token === null) seq.finish("stop");
    else seq.onToken(pick.token, pick.top);
  }

  /** Every sequence, the choices not yet forked included. */
  #all(): Sequence[] {
    return [...this.#scheduler.waiting, ...this.#scheduler.running].flatMap((s) => [
      s,
      ...s.followers,
    ]);
  }
}
