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
import type { Backend, KvCache, SequenceSlice } from "../backend/backend.ts";
import { createBackend } from "../backend/mod.ts";
import { errorMessage } from "../common/errors.ts";
import { type GgufFile, openGguf } from "../gguf/mod.ts";
import { Qwen3Model } from "../models/qwen3.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/mod.ts";
import { EngineError } from "./errors.ts";
import { KvBlocks } from "./kv_blocks.ts";
import type { EngineOptions, EngineStats, GenerateRequest, ModelDescription } from "./protocol.ts";
import { topIds } from "./sampler.ts";
import { type EventSink, Sequence } from "./sequence.ts";
import { describeModel } from "./describe.ts";

const KV_BLOCK_SIZE = 16;

export class Engine {
  readonly description: ModelDescription;
  readonly #file: GgufFile;
  readonly #backend: Backend;
  readonly #model: Qwen3Model;
  readonly #tokenizer: Tokenizer;
  readonly #template: ChatTemplate | null;
  readonly #cache: KvCache;
  readonly #blocks: KvBlocks;
  readonly #options: EngineOptions;
  readonly #contextLength: number;
  #waiting: Sequence[] = [];
  #running: Sequence[] = [];
  readonly #stats = { prefillTokens: 0, prefillSeconds: 0, decodeTokens: 0, decodeSeconds: 0 };

  private constructor(
    options: EngineOptions,
    file: GgufFile,
    backend: Backend,
    model: Qwen3Model,
    tokenizer: Tokenizer,
    template: ChatTemplate | null,
  ) {
    this.#options = options;
    this.#file = file;
    this.#backend = backend;
    this.#model = model;
    this.#tokenizer = tokenizer;
    this.#template = template;
    const hp = model.hparams;
    const cap = options.contextLength > 0 ? options.contextLength : hp.contextLength;
    this.#contextLength = Math.min(cap, hp.contextLength);
    const nBlocks = Math.ceil(this.#contextLength / KV_BLOCK_SIZE) *
      Math.max(1, options.maxSequences);
    this.#blocks = new KvBlocks(nBlocks, KV_BLOCK_SIZE);
    this.#cache = backend.createKvCache({
      nLayers: hp.nLayers,
      nKvHeads: hp.nKvHeads,
      headDim: hp.headDim,
      blockSize: KV_BLOCK_SIZE,
      nBlocks,
      dtype: options.kvDtype,
    });
    this.description = describeModel(
      file,
      hp,
      this.#contextLength,
      this.#cache.bytes,
      backend.kind,
      tokenizer,
    );
  }

  /** Opens the model file and builds everything; a failure releases what was built. */
  static open(options: EngineOptions): Engine {
    const file = openGguf(options.modelPath);
    let backend: Backend | null = null;
    try {
      const tokenizer = loadTokenizer(file);
      let template: ChatTemplate | null = null;
      try {
        template = chatTemplateFromGguf(file);
      } catch {
        // A model without a usable template still serves completions; chat says why.
      }
      backend = createBackend(options.device, { threads: options.threads });
      const model = Qwen3Model.load(file, backend);
      return new Engine(options, file, backend, model, tokenizer, template);
    } catch (err) {
      backend?.close();
      file.close();
      throw err;
    }
  }

  get hasWork(): boolean {
    return this.#running.length > 0 || this.#waiting.length > 0;
  }

  /**
   * Validates and queues a request. Errors (bad template input, prompt too long) are
   * thrown here, before anything is streamed.
   */
  submit(request: GenerateRequest, sink: EventSink): void {
    const { ids, parser } = this.#preparePrompt(request);
    if (ids.length === 0) throw new EngineError("invalid_request", "the prompt is empty");
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.#model.hparams.vocabSize) {
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
      Int32Array.from(ids),
      asked ?? room,
      this.#tokenizer,
      this.#model.hparams.vocabSize,
      parser,
      sink,
    );
    this.#waiting.push(seq);
    sink({ type: "accepted", id: request.id, promptTokens: ids.length });
  }

  /** Stops a request (queued or running) and frees its cache blocks. */
  cancel(id: string): void {
    const waiting = this.#waiting.find((s) => s.id === id);
    if (waiting) {
      this.#waiting = this.#waiting.filter((s) => s !== waiting);
      waiting.finish("cancelled");
      return;
    }
    const running = this.#running.find((s) => s.id === id);
    if (running) {
      running.finish("cancelled");
      this.#retire();
    }
  }

  /** Fails every request with an error (a step that could not run). */
  failAll(code: string, message: string): void {
    for (const s of [...this.#waiting, ...this.#running]) s.fail(code, message);
    this.#waiting = [];
    this.#retire();
  }

  /** Ends every request (unload, shutdown). */
  cancelAll(): void {
    for (const s of [...this.#waiting, ...this.#running]) s.finish("cancelled");
    this.#waiting = [];
    this.#retire();
  }

  /** Runs one forward pass over the scheduled tokens and samples where due. */
  step(): void {
    this.#admit();
    if (this.#running.length === 0) return;

    const ids: number[] = [];
    const positions: number[] = [];
    const slices: SequenceSlice[] = [];
    const sampled: Array<{ seq: Sequence; row: number }> = [];
    const fed: Sequence[] = [];
    let budget = this.#options.maxBatchTokens;
    let prefillRows = 0;

    for (const seq of this.#running) {
      if (budget === 0) break;
      const rowStart = ids.length;
      if (seq.prefilling) {
        const n = Math.min(seq.prompt.length - seq.cached, budget);
        for (let i = 0; i < n; i++) {
          ids.push(seq.prompt[seq.cached + i]);
          positions.push(seq.cached + i);
        }
        prefillRows += n;
        if (seq.cached + n === seq.prompt.length) sampled.push({ seq, row: rowStart + n - 1 });
      } else {
        ids.push(seq.pending);
        positions.push(seq.cached);
        sampled.push({ seq, row: rowStart });
      }
      const rowCount = ids.length - rowStart;
      budget -= rowCount;
      fed.push(seq);
      slices.push({ rowStart, rowCount, blockTable: seq.blockTable! });
    }

    const started = performance.now();
    const logits = this.#model.forward(
      Int32Array.from(ids),
      { positions: Int32Array.from(positions), sequences: slices },
      this.#cache,
      Int32Array.from(sampled, (s) => s.row),
    );
    const rows = this.#backend.read(logits);
    const seconds = (performance.now() - started) / 1000;
    this.#account(prefillRows, ids.length - prefillRows, seconds);

    slices.forEach((slice, i) => {
      fed[i].cached += slice.rowCount;
    });
    const vocab = this.#model.hparams.vocabSize;
    sampled.forEach(({ seq }, i) => {
      const row = rows.subarray(i * vocab, (i + 1) * vocab);
      const top = seq.topLogits > 0
        ? topIds(row, seq.topLogits).map((id): [number, number] => [id, row[id]])
        : undefined;
      seq.onToken(seq.sampler.sample(row), top);
    });
    this.#retire();
  }

  stats(): EngineStats {
    return {
      running: this.#running.length,
      waiting: this.#waiting.length,
      kvBlocksUsed: this.#blocks.usedBlocks,
      kvBlocksFree: this.#blocks.freeBlocks,
      ...this.#stats,
    };
  }

  close(): void {
    this.cancelAll();
    this.#model.close();
    this.#backend.close();
    this.#file.close();
  }

  /** Moves waiting sequences into the running set while there is room and cache. */
  #admit(): void {
    while (this.#waiting.length > 0 && this.#running.length < this.#options.maxSequences) {
      const seq = this.#waiting[0];
      const table = this.#blocks.allocate(seq.maxPositions);
      if (table === null) break;
      seq.blockTable = table;
      this.#waiting.shift();
      this.#running.push(seq);
    }
  }

  /** Drops finished sequences and returns their blocks. */
  #retire(): void {
    const keep: Sequence[] = [];
    for (const seq of this.#running) {
      if (!seq.finished) {
        keep.push(seq);
        continue;
      }
      if (seq.blockTable) this.#blocks.release(seq.blockTable);
      seq.blockTable = null;
    }
    this.#running = keep;
  }

  #account(prefill: number, decode: number, seconds: number): void {
    const total = prefill + decode;
    if (total === 0) return;
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
