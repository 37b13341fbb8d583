/**
 * A model's front end: everything about text. It turns a request into token ids (the chat
 * template, the tokenizer) with where a later turn may reuse the prompt's cache, and makes
 * the request's output pipeline (output.ts) that turns sampled ids back into events. The
 * engine core never sees text.
 */

import {
  type AddedSpecials,
  ChatError,
  type ChatFormat,
  type ChatTemplate,
  chatTemplateFromGguf,
  detectChatFormat,
  OutputParser,
  promptOpensReasoning,
} from "../chat/mod.ts";
import { errorMessage } from "../common/errors.ts";
import type { EngineRequest } from "../engine/mod.ts";
import type { GgufFile } from "../gguf/mod.ts";
import { loadTokenizer, type Tokenizer, utf8Length } from "../tokenizer/mod.ts";
import { Constraints } from "./constraints.ts";
import { FrontEndError } from "./errors.ts";
import type { GenerateRequest, GenerationEvent, PoolInput } from "./events.ts";
import { RequestOutput } from "./output.ts";
import { poolPromptIds } from "./pool_prompt.ts";

/** A request made ready for the engine core, and the pipeline its tokens go through. */
export interface PreparedRequest {
  request: EngineRequest;
  /** The first choice's pipeline. */
  output: RequestOutput;
  /** Every choice's pipeline (`n` of them), the first one first. */
  outputs: RequestOutput[];
}

/** Lets other work run between two slices of a long prompt's tokenizing. */
export type Pause = () => Promise<void>;

const NO_PAUSE: Pause = () => Promise.resolve();

export class FrontEnd {
  readonly tokenizer: Tokenizer;
  /** Null when the model has no usable template: completions still work, chat says why. */
  readonly template: ChatTemplate | null;
  /** How the model writes tool calls and reasoning, from its template (chat/format.ts). */
  readonly format: ChatFormat;
  /** The template knows `<think>` blocks and the tokenizer has `<think>`/`</think>`. */
  readonly hasReasoning: boolean;
  /** The template has a tool-call syntax neuron reads. */
  readonly hasToolCalls: boolean;
  /** The control token that opens every turn in this template's renders, if one does. */
  readonly #turnOpening: number | undefined;
  /** Control tokens the tool-call reader must see as text. */
  readonly #preserved: ReadonlySet<number>;
  readonly #constraints: Constraints;

  constructor(
    tokenizer: Tokenizer,
    template: ChatTemplate | null,
    /** Tokens a prompt may have at most: the model's context. */
    readonly contextLength = Infinity,
    /** A reranker's prompt for a query and a document (models/pooling.ts), if it has one. */
    readonly rerankPrompt: string | null = null,
  ) {
    this.tokenizer = tokenizer;
    this.template = template;
    this.format = detectChatFormat(template?.source ?? "");
    const has = (...texts: string[]): boolean =>
      texts.every((t) => tokenizer.tokenId(t) !== undefined);
    this.hasReasoning = this.format.reasoning && has("<think>", "</think>");
    this.hasToolCalls = this.format.toolCalls !== "none";
    this.#turnOpening = turnOpening(tokenizer, template);
    this.#preserved = new Set(
      this.format.preservedTokens.map((t) => tokenizer.tokenId(t)).filter((
        id,
      ): id is number => id !== undefined && tokenizer.isControl(id)),
    );
    this.#constraints = new Constraints(tokenizer, this.format);
  }

  static fromGguf(file: GgufFile, contextLength?: number, rerankPrompt?: string | null): FrontEnd {
    const tokenizer = loadTokenizer(file);
    let template: ChatTemplate | null = null;
    try {
      template = chatTemplateFromGguf(file, addedSpecials(tokenizer));
    } catch {
      // A model without a usable template still serves completions; chat says why.
    }
    return new FrontEnd(tokenizer, template, contextLength, rerankPrompt ?? null);
  }

  /**
   * The token ids of a pooling request's inputs (pool_prompt.ts), each checked to fit the
   * context by its bytes first; `pause` between inputs.
   */
  async poolPrompts(inputs: readonly PoolInput[], pause: Pause = NO_PAUSE): Promise<number[][]> {
    const added = addedSpecials(this.tokenizer);
    const out: number[][] = [];
    for (const input of inputs) {
      if (input.kind === "text") this.#checkFits(input.text);
      if (input.kind === "pair") this.#checkFits(input.query + input.document);
      out.push(poolPromptIds(this.tokenizer, input, this.rerankPrompt, added));
      await pause();
    }
    return out;
  }

  /**
   * Renders and tokenizes the prompt and makes the request's output pipeline, which sends
   * its events to `sink`. A prompt whose bytes alone show it cannot fit the context is
   * refused before it is tokenized; a long one is tokenized a slice at a time, with `pause`
   * between slices. Errors are thrown here, before anything runs.
   */
  async prepare(
    request: GenerateRequest,
    sink: (event: GenerationEvent) => void,
    pause: Pause = NO_PAUSE,
  ): Promise<PreparedRequest> {
    const prompt = request.prompt;
    const wantsParse = request.parseOutput ?? prompt.kind === "messages";
    let ids: number[];
    let text = "";
    if (prompt.kind === "tokens") {
      ids = prompt.ids;
    } else {
      text = prompt.kind === "text" ? prompt.text : this.#render(prompt);
      this.#checkFits(text);
      const slices = this.tokenizer.encodeInSlices(text, { parseSpecial: true, addSpecial: true });
      for (let r = slices.next();; r = slices.next()) {
        if (r.done) {
          ids = r.value;
          break;
        }
        await pause();
      }
    }
    const toolCalls = wantsParse && prompt.kind === "messages" && this.hasToolCalls &&
      (prompt.tools?.length ?? 0) > 0;
    const parser = (): OutputParser | null =>
      wantsParse
        ? new OutputParser({
          reasoning: this.hasReasoning,
          startInReasoning: prompt.kind !== "tokens" && promptOpensReasoning(text),
          toolCalls,
          syntax: this.format.toolCalls,
          tools: prompt.kind === "messages" ? prompt.tools : undefined,
        })
        : null;
    const opening = this.#turnOpening === undefined ? -1 : ids.lastIndexOf(this.#turnOpening);
    const readsReasoning = wantsParse && this.hasReasoning && prompt.kind === "messages";
    const filter = request.constraint === undefined
      ? undefined
      : this.#constraints.filter(request.constraint, readsReasoning ? text : null);
    const scored = request.echo === true && request.promptLogprobs !== undefined;
    const echo = request.echo
      ? { text: prompt.kind === "tokens" ? this.tokenizer.decode(ids) : text, ids, scored }
      : undefined;
    const outputs = Array.from(
      { length: Math.max(1, request.n ?? 1) },
      (_, choice) =>
        new RequestOutput(this.tokenizer, parser(), request.stop ?? [], sink, {
          preserved: toolCalls ? this.#preserved : undefined,
          newToolCallId: this.format.newToolCallId,
          maxToolCalls: request.maxToolCalls,
          choice,
          echo,
        }),
    );
    return {
      request: {
        id: request.id,
        prompt: ids,
        maxTokens: request.maxTokens,
        sampling: request.sampling,
        stopTokenIds: request.ignoreEos ? [] : [...this.tokenizer.eogIds],
        topLogits: request.topLogits,
        reuseBoundary: opening >= 0 ? opening + 1 : undefined,
        ...(filter ? { filter } : {}),
        ...(scored ? { promptLogprobs: request.promptLogprobs } : {}),
        ...(request.speculative ? { speculative: request.speculative } : {}),
      },
      output: outputs[0],
      outputs,
    };
  }

  /** Refuses a text whose fewest possible tokens (its bytes over the longest token's) overflow. */
  #checkFits(text: string): void {
    const bytes = utf8Length(text);
    const fewest = Math.ceil(bytes / this.tokenizer.maxTokenBytes);
    if (fewest <= this.contextLength) return;
    throw new FrontEndError(
      "context_length_exceeded",
      `this model's maximum context length is ${this.contextLength} tokens; the prompt has at ` +
        `least ${fewest} tokens (${bytes} bytes, at most ${this.tokenizer.maxTokenBytes} per token)`,
    );
  }

  #render(prompt: Extract<GenerateRequest["prompt"], { kind: "messages" }>): string {
    if (this.template === null) {
      throw new FrontEndError("template_unavailable", "this model has no usable chat template");
    }
    try {
      return this.template.render(prompt.messages, {
        tools: prompt.tools,
        kwargs: prompt.templateKwargs,
      });
    } catch (err) {
      const code = err instanceof ChatError && err.code === "chat_template_failed"
        ? err.code
        : "template_render_failed";
      throw new FrontEndError(code, errorMessage(err), { cause: err });
    }
  }
}

/**
 * Whether the tokenizer puts BOS before (EOS after) every prompt itself, so that the
 * template's own is dropped.
 */
export function addedSpecials(tokenizer: Tokenizer): AddedSpecials {
  const ids = tokenizer.encode("", { addSpecial: true });
  const addBos = tokenizer.bosId !== null && ids[0] === tokenizer.bosId;
  const addEos = tokenizer.eosId !== null && ids.length === (addBos ? 2 : 1) &&
    ids.at(-1) === tokenizer.eosId;
  return { addBos, addEos };
}

/**
 * The control token that opens a turn: the first one after BOS in the render of a single
 * message (`<|im_start|>` for ChatML, `<|start_header_id|>` for Llama 3). A re-rendered
 * history comes back token for token only up to its last turn's opening.
 */
function turnOpening(tokenizer: Tokenizer, template: ChatTemplate | null): number | undefined {
  if (template === null) return undefined;
  let ids: number[];
  try {
    const text = template.render([{ role: "user", content: "x" }], { addGenerationPrompt: false });
    ids = tokenizer.encode(text, { parseSpecial: true });
  } catch {
    return undefined;
  }
  return ids.find((id) => id !== tokenizer.bosId && tokenizer.isControl(id));
}
