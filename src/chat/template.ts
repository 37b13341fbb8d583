/**
 * Renders a model's chat template (GGUF `tokenizer.chat_template`) with
 * @huggingface/jinja, passing what llama-server passes: messages and tools in its
 * normalized form, `add_generation_prompt`, `bos_token`/`eos_token`, the date and
 * functions of template_globals.ts, and the request's chat_template_kwargs (e.g.
 * `enable_thinking`) as top-level variables. Where the tokenizer adds BOS (or EOS) itself,
 * the one the template renders first (last) is dropped, as llama.cpp drops it.
 */

import { Template } from "@huggingface/jinja";
import { errorMessage } from "../common/errors.ts";
import type { GgufFile } from "../gguf/mod.ts";
import { optionalBool, optionalNumber, optionalString, optionalStringArray } from "../gguf/mod.ts";
import { ChatError } from "./errors.ts";
import { DEFAULT_RENDER_BUDGET, type RenderBudget, withinBudget } from "./render_budget.ts";
import {
  dateVariables,
  GLOBAL_NAMES,
  renderWithGlobals,
  TemplateRaised,
} from "./template_globals.ts";
import {
  type ChatMessage,
  type ChatTool,
  type TemplateMessage,
  toTemplateMessage,
  toTemplateTool,
} from "./messages.ts";

export interface RenderOptions {
  tools?: ChatTool[];
  /**
   * Continue the final message instead of opening a new turn (llama-server's assistant
   * prefill, vLLM's continue_final_message). Default: when the conversation ends with an
   * assistant message that has text.
   */
  continueFinal?: boolean;
  /** What the render may spend (default DEFAULT_RENDER_BUDGET). */
  budget?: RenderBudget;
  /** Open an assistant turn at the end (default true). */
  addGenerationPrompt?: boolean;
  /** Extra template variables (chat_template_kwargs), e.g. `{ enable_thinking: false }`. */
  kwargs?: Record<string, unknown>;
  /** The time the template sees as now (default: the render's); llama.cpp's `now`. */
  now?: Date;
}

export interface SpecialTokenTexts {
  bosToken?: string;
  eosToken?: string;
  /** The tokenizer adds BOS to every prompt: a leading `bosToken` is dropped. */
  addBos?: boolean;
  /** The tokenizer adds EOS to every prompt: a trailing `eosToken` is dropped. */
  addEos?: boolean;
}

/** Whether the tokenizer adds BOS and EOS itself. */
export type AddedSpecials = Pick<SpecialTokenTexts, "addBos" | "addEos">;

// Reserved names a request's kwargs may not replace.
const RESERVED = new Set([
  "messages",
  "tools",
  "add_generation_prompt",
  "bos_token",
  "eos_token",
]);

const ARGUMENT_NEEDLE = "argument_needle";

function checkKwargs(kwargs: Record<string, unknown> = {}): void {
  for (const key of Object.keys(kwargs)) {
    if (RESERVED.has(key) || GLOBAL_NAMES.has(key)) {
      throw new ChatError("invalid_request", `chat_template_kwargs may not set '${key}'`);
    }
  }
}

export class ChatTemplate {
  readonly source: string;
  readonly #template: Template;
  readonly #special: SpecialTokenTexts;
  #objectArguments: boolean | undefined;

  constructor(source: string, special: SpecialTokenTexts = {}) {
    this.source = source;
    this.#special = special;
    try {
      this.#template = new Template(source);
    } catch (err) {
      throw new ChatError(
        "template_render_failed",
        `chat template does not parse: ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  /** Renders a conversation to the exact prompt text. */
  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    checkKwargs(options.kwargs);
    return this.#withoutAddedSpecials(withinBudget(options.budget ?? DEFAULT_RENDER_BUDGET, () => {
      const normalized = this.#normalized(messages);
      const last = normalized.at(-1);
      const continueFinal = options.continueFinal ??
        (last?.role === "assistant" && last.content !== "" && !last.tool_calls);
      if (!continueFinal || last === undefined) {
        return this.#render(this.#variables(normalized, options));
      }
      // Rendered as a finished turn, then cut right after its text: what follows it is the
      // end-of-turn markup that would close it.
      const text = this.#render(
        this.#variables(normalized, { ...options, addGenerationPrompt: false }),
      );
      const at = last.content === "" ? -1 : text.lastIndexOf(last.content);
      if (at < 0) {
        throw new ChatError(
          "invalid_request",
          "cannot continue the final message: the chat template does not show its text as given",
        );
      }
      return text.slice(0, at + last.content.length);
    }));
  }

  /**
   * The variables a render of this conversation gives the template (messages and tools
   * normalized, the dates, kwargs), for checking the render against another Jinja engine.
   * `continueFinal` and the dropping of added BOS/EOS are render()'s, not the template's.
   */
  variables(messages: ChatMessage[], options: RenderOptions = {}): Record<string, unknown> {
    checkKwargs(options.kwargs);
    return withinBudget(
      options.budget ?? DEFAULT_RENDER_BUDGET,
      () => this.#variables(this.#normalized(messages), options),
    );
  }

  #normalized(messages: ChatMessage[]): TemplateMessage[] {
    const normalized = messages.map(toTemplateMessage);
    return normalized.some((m) => m.tool_calls) && this.#requiresObjectArguments()
      ? normalized.map(withObjectArguments)
      : normalized;
  }

  #variables(messages: TemplateMessage[], options: RenderOptions): Record<string, unknown> {
    const variables: Record<string, unknown> = {
      ...dateVariables(options.now ?? new Date()),
      ...options.kwargs,
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: this.#special.bosToken ?? "",
      eos_token: this.#special.eosToken ?? "",
    };
    if (options.tools !== undefined && options.tools.length > 0) {
      variables.tools = options.tools.map(toTemplateTool);
    }
    return variables;
  }

  #withoutAddedSpecials(text: string): string {
    const { bosToken, eosToken, addBos, addEos } = this.#special;
    let out = text;
    if (addBos && bosToken && out.startsWith(bosToken)) out = out.slice(bosToken.length);
    if (addEos && eosToken && out.endsWith(eosToken)) out = out.slice(0, -eosToken.length);
    return out;
  }

  #render(variables: Record<string, unknown>): string {
    try {
      return renderWithGlobals(this.#template, variables);
    } catch (err) {
      if (err instanceof ChatError) throw err;
      if (err instanceof TemplateRaised) {
        throw new ChatError(
          "template_render_failed",
          `the model's chat template refused these messages: ${err.message}`,
          { cause: err },
        );
      }
      throw new ChatError(
        "template_render_failed",
        `chat template failed to render: ${errorMessage(err)}`,
        { cause: err },
      );
    }
  }

  /**
   * Whether the template only renders tool-call arguments given as objects (Llama 3.1
   * style). Probed once as minja does: render a call with string arguments and one with
   * object arguments and see which shows the argument.
   */
  #requiresObjectArguments(): boolean {
    if (this.#objectArguments !== undefined) return this.#objectArguments;
    const args = { [ARGUMENT_NEEDLE]: "print('Hello, World!')" };
    const probe = (value: string | Record<string, unknown>): boolean => {
      const messages: TemplateMessage[] = [
        { role: "user", content: "Hey" },
        {
          role: "assistant",
          content: "",
          // Mistral's templates take a call back only with an id of 9 characters.
          tool_calls: [{
            type: "function",
            function: { name: "ipython", arguments: value },
            id: "call00001",
          }],
        },
      ];
      try {
        const out = this.#render(this.#variables(messages, { addGenerationPrompt: false }));
        return out.includes(`"${ARGUMENT_NEEDLE}":`) || out.includes(`'${ARGUMENT_NEEDLE}':`);
      } catch (err) {
        if (err instanceof ChatError && err.code === "chat_template_failed") throw err;
        return false;
      }
    };
    this.#objectArguments = !probe(JSON.stringify(args)) && probe(args);
    return this.#objectArguments;
  }
}

function withObjectArguments(message: TemplateMessage): TemplateMessage {
  if (!message.tool_calls) return message;
  return {
    ...message,
    tool_calls: message.tool_calls.map((call) => {
      const args = call.function.arguments;
      if (typeof args !== "string") return call;
      try {
        const parsed: unknown = JSON.parse(args);
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return call;
        return {
          ...call,
          function: { ...call.function, arguments: parsed as Record<string, unknown> },
        };
      } catch {
        return call;
      }
    }),
  };
}

/**
 * The chat template of a GGUF file, with its BOS/EOS token texts. Whether the tokenizer
 * adds BOS/EOS is the file's `add_bos_token`/`add_eos_token` unless `added` says (the
 * tokenizer knows the defaults of a file that does not).
 */
export function chatTemplateFromGguf(file: GgufFile, added: AddedSpecials = {}): ChatTemplate {
  const source = optionalString(file, "tokenizer.chat_template");
  if (source === undefined) {
    throw new ChatError(
      "template_missing",
      `${file.path ?? "the model"} has no tokenizer.chat_template`,
    );
  }
  const tokens = optionalStringArray(file, "tokenizer.ggml.tokens") ?? [];
  const text = (key: string): string | undefined => {
    const id = optionalNumber(file, key);
    return id !== undefined && id >= 0 && id < tokens.length ? tokens[id] : undefined;
  };
  return new ChatTemplate(source, {
    bosToken: text("tokenizer.ggml.bos_token_id"),
    eosToken: text("tokenizer.ggml.eos_token_id"),
    addBos: added.addBos ?? optionalBool(file, "tokenizer.ggml.add_bos_token") ?? false,
    addEos: added.addEos ?? optionalBool(file, "tokenizer.ggml.add_eos_token") ?? false,
  });
}
