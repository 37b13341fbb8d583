/**
 * The engine of one loaded model. It owns the file, weights, tokenizer, chat template,
 * KV cache and the running sequences, and advances them one step at a time: each step
 * feeds every decoding sequence its last token plus a chunk of a waiting prompt, in one
 * forward pass, then samples for every sequence that produced logits. Runs inside the
 * model's Worker (worker.ts); nothing here knows about messages or HTTP.
 */

import {
  type ChatTemplate,
  chatTemplateFromGguf,
  OutputParser,
  promptOpensReasoning,
} from "../chat/mod.ts";
import type { SequenceSlice, StepInterrupt } from "../backend/backend.ts";
import { errorMessage } from "../common/errors.ts";
import { type GgufFile, openGguf } from "../gguf/mod.ts";
import { readQwen3Hparams } from "../models/qwen3.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/mod.ts";
import { EngineError } from "./errors.ts";
import { BlockPool } from "./kv/block_pool.ts";
import { Scheduler } from "./scheduler.ts";
import { StepBudget, stepWork } from "./step_budget.ts";
import type { EngineOptions, EngineStats, GenerateRequest, ModelDescription } from "./protocol.ts";
import { type SampledToken, topIds } from "./sampler.ts";
import { type EventSink, Sequence } from "./sequence.ts";
import { describeModel } from "./describe.ts";
import { type ModelRunner, openRunner, type StepBatch } from "./runner.ts";

const KV_BLOCK_SIZE = 16;

/** A sequence's next token, and the raw top logits it asked to see. */
interface Pick {
  token: SampledToken;
  top?: Array<[number, number]>;
}
/** How long a step may take when it carries prompt chunks (see step_budget.ts). */
const DEFAULT_STEP_TARGET_MS = 150;
const MIN_STEP_TOKENS = 16;

export class Engine {
  readonly description: ModelDescription;
  readonly #file: GgufFile;
  readonly #runner: ModelRunner;
  readonly #tokenizer: Tokenizer;
  readonly #template: ChatTemplate | null;
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

  private constructor(
    options: EngineOptions,
    file: GgufFile,
    runner: ModelRunner,
    pool: BlockPool,
    contextLength: number,
    tokenizer: Tokenizer,
    template: ChatTemplate | null,
  ) {
    this.#file = file;
    this.#runner = runner;
    this.#pool = pool;
    this.#contextLength = contextLength;
    this.#tokenizer = tokenizer;
    this.#template = template;
    this.#scheduler = new Scheduler(pool, {
      maxSequences: Math.max(1, options.maxSequences),
      copyRows: runner.copyKvRows?.bind(runner),
    });
    this.#budget = new StepBudget(
      options.stepTargetMs ?? DEFAULT_STEP_TARGET_MS,
      Math.min(MIN_STEP_TOKENS, options.maxBatchTokens),
      options.maxBatchTokens,
    );
    this.description = {
      ...describeModel(
        file,
        runner.hparams,
        contextLength,
        runner.kvBytes,
        runner.device,
        tokenizer,
      ),
      deviceBytes: runner.deviceBytes?.() ?? 0,
    };
  }

  /** Opens the model file and builds everything; a failure releases what was built. */
  static open(options: EngineOptions): Engine {
    const file = openGguf(options.modelPath, { populate: true });
    try {
      const tokenizer = loadTokenizer(file);
      let template: ChatTemplate | null = null;
      try {
        template = chatTemplateFromGguf(file);
      } catch {
        // A model without a usable template still serves completions; chat says why.
      }
      const hp = readQwen3Hparams(file);
      const cap = options.contextLength > 0 ? options.contextLength : hp.contextLength;
      const contextLength = Math.min(cap, hp.contextLength);
      // The pool always holds at least one whole-context sequence, so a request that fits
      // the context can always run, even alone after preempting everyone else.
      const blockBytes = 2 * hp.nLayers * KV_BLOCK_SIZE * hp.nKvHeads * hp.headDim *
        (options.kvDtype === "f16" ? 2 : 4);
      const budgetBlocks = Math.floor((options.kvBudgetBytes ?? 0) / blockBytes);
      const nBlocks = Math.max(Math.ceil(contextLength / KV_BLOCK_SIZE), budgetBlocks);
      const pool = new BlockPool(nBlocks, KV_BLOCK_SIZE);
      const runner = openRunner(
        file,
        {
          device: options.device,
          threads: options.threads,
          mmap: options.mmap,
          tensorParallel: options.tensorParallel,
          devices: options.devices,
          cuda: options.cuda,
        },
        { blockSize: KV_BLOCK_SIZE, nBlocks, dtype: options.kvDtype },
      );
      return new Engine(options, file, runner, pool, contextLength, tokenizer, template);
    } catch (err) {
      file.close();
      throw err;
    }
  }

  get hasWork(): boolean {
    return this.#scheduler.hasWork;
  }

  /**
   * Validates and queues a request. Errors (bad template input, prompt too long) are
   * thrown here, before anything is streamed.
   */
  submit(request: GenerateRequest, sink: EventSink): void {
    const { ids, parser } = this.#preparePrompt(request);
    if (ids.length === 0) throw new EngineError("invalid_request", "the prompt is empty");
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.#runner.hparams.vocabSize) {
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
    const seq = new Sequence(
      request,
      ids,
      asked ?? room,
      this.#tokenizer,
      this.#runner.hparams.vocabSize,
      parser,
      sink,
    );
    // A chat history is re-rendered each turn: only up to its last turn's opening is sure
    // to come back token for token.
    const imStart = this.#tokenizer.tokenId("<|im_start|>");
    const opening = imStart === undefined ? -1 : ids.lastIndexOf(imStart);
    if (opening >= 0) seq.reuseBoundary = opening + 1;
    this.#scheduler.enqueue(seq);
    sink({ type: "accepted", id: request.id, promptTokens: ids.length });
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

    const batch = {
      ids: Int32Array.from(ids),
      layout: { positions: Int32Array.from(positions), sequences: slices },
      logitRows: Int32Array.from(logitRows),
    };
    const sampling = runs.filter((r) => r.sample).map((r) => r.seq);
    const started = performance.now();
    const stoppable = prefill > 0 && !this.#interrupted;
    const picks = this.#run(batch, sampling, stoppable ? interrupt : undefined);
    this.#interrupted = picks === null;
    if (picks === null) {
      this.#stats.interruptedSteps++;
      return;
    }
    const seconds = (performance.now() - started) / 1000;
    this.#account(prefill, ids.length - prefill, seconds);
    this.#budget.observe(stepWork(runs), seconds);
    this.#scheduler.complete(runs);
    sampling.forEach((seq, i) => seq.onToken(picks[i].token, picks[i].top));
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

  close(): void {
    this.cancelAll();
    this.#runner.close();
    this.#file.close();
  }

  /** The step's forward pass and each sampling sequence's pick; null when interrupted. */
  #run(batch: StepBatch, sampling: Sequence[], interrupt?: StepInterrupt): Pick[] | null {
    const argmaxOnly = this.#runner.forwardArgmax !== undefined &&
      sampling.every((seq) => seq.sampler.plainGreedy && seq.topLogits === 0);
    if (argmaxOnly) {
      const ids = this.#runner.forwardArgmax!(batch, interrupt);
      return ids && Array.from(ids, (id): Pick => ({ token: { id } }));
    }
    const logits = this.#runner.forward(batch, interrupt);
    return logits && this.#sample(logits, sampling);
  }

  /** Samples each sequence's token from its row of `rows`. */
  #sample(rows: Float32Array, sampling: Sequence[]): Pick[] {
    const vocab = this.#runner.hparams.vocabSize;
    return sampling.map((seq, i) => {
      const logits = rows.subarray(i * vocab, (i + 1) * vocab);
      const top = seq.topLogits > 0
        ? topIds(logits, seq.topLogits).map((id): [number, number] => [id, logits[id]])
        : undefined;
      return { token: seq.sampler.sample(logits), top };
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

  #preparePrompt(request: GenerateRequest): { ids: number[]; parser: OutputParser | null } {
    const prompt = request.prompt;
    const wantsParse = request.parseOutput ?? prompt.kind === "messages";
    if (prompt.kind === "tokens") {
      return {
        ids: prompt.ids,
        parser: wantsParse ? new OutputParser({ reasoning: this.description.hasReasoning }) : null,
      };
    }
    let text: string;
    if (prompt.kind === "text") {
      text = prompt.text;
    } else {
      if (this.#template === null) {
        throw new EngineError("template_unavailable", "this model has no usable chat template");
      }
      try {
        text = this.#template.render(prompt.messages, {
          tools: prompt.tools,
          kwargs: prompt.templateKwargs,
        });
      } catch (err) {
        throw new EngineError("template_render_failed", errorMessage(err));
      }
    }
    const ids = this.#tokenizer.encode(text, { parseSpecial: true, addSpecial: true });
    const parser = wantsParse
      ? new OutputParser({
        reasoning: this.description.hasReasoning,
        startInReasoning: promptOpensReasoning(text),
        toolCalls: prompt.kind === "messages" && (prompt.tools?.length ?? 0) > 0,
        tools: prompt.kind === "messages" ? prompt.tools : undefined,
      })
      : null;
    return { ids, parser };
  }
}
