/**
 * Renders a model's chat template (GGUF `tokenizer.chat_template`) with
 * @huggingface/jinja, passing what llama-server passes: messages and tools in its
 * normalized form, `add_generation_prompt`, `bos_token`/`eos_token`, and the request's
 * chat_template_kwargs (e.g. `enable_thinking`) as top-level variables.
 */

import { Template } from "@huggingface/jinja";
import { errorMessage } from "../common/errors.ts";
import type { GgufFile } from "../gguf/mod.ts";
import { optionalNumber, optionalString, optionalStringArray } from "../gguf/mod.ts";
import { ChatError } from "./errors.ts";
import { DEFAULT_RENDER_BUDGET, type RenderBudget, withinBudget } from "./render_budget.ts";
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
}

export interface SpecialTokenTexts {
  bosToken?: string;
  eosToken?: string;
}

// Reserved names a request's kwargs may not replace.
const RESERVED = new Set([
  "messages",
  "tools",
  "add_generation_prompt",
  "bos_token",
  "eos_token",
  "range",
]);

const ARGUMENT_NEEDLE = "argument_needle";

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
    for (const key of Object.keys(options.kwargs ?? {})) {
      if (RESERVED.has(key)) {
        throw new ChatError("invalid_request", `chat_template_kwargs may not set '${key}'`);
      }
    }
    return withinBudget(options.budget ?? DEFAULT_RENDER_BUDGET, () => {
      let normalized = messages.map(toTemplateMessage);
      if (normalized.some((m) => m.tool_calls) && this.#requiresObjectArguments()) {
        normalized = normalized.map(withObjectArguments);
      }
      const tools = options.tools?.map(toTemplateTool) ?? [];
      const last = normalized.at(-1);
      const continueFinal = options.continueFinal ??
        (last?.role === "assistant" && last.content !== "" && !last.tool_calls);
      if (!continueFinal || last === undefined) {
        return this.#render(normalized, tools, options.addGenerationPrompt ?? true, options.kwargs);
      }
      // Rendered as a finished turn, then cut right after its text: what follows it is the
      // end-of-turn markup that would close it.
      const text = this.#render(normalized, tools, false, options.kwargs);
      const at = last.content === "" ? -1 : text.lastIndexOf(last.content);
      if (at < 0) {
        throw new ChatError(
          "invalid_request",
          "cannot continue the final message: the chat template does not show its text as given",
        );
      }
      return text.slice(0, at + last.content.length);
    });
  }

  #render(
    messages: TemplateMessage[],
    tools: unknown[],
    addGenerationPrompt: boolean,
    kwargs: Record<string, unknown> = {},
  ): string {
    const context: Record<string, unknown> = {
      ...kwargs,
      messages,
      add_generation_prompt: addGenerationPrompt,
      bos_token: this.#special.bosToken ?? "",
      eos_token: this.#special.eosToken ?? "",
    };
    if (tools.length > 0) context.tools = tools;
    try {
      return this.#template.render(context);
    } catch (err) {
      if (err instanceof ChatError) throw err;
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
          tool_calls: [{ type: "function", function: { name: "ipython", arguments: value } }],
        },
      ];
      try {
        const out = this.#render(messages, [], false);
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

/** The chat template of a GGUF file, with its BOS/EOS token texts. */
export function chatTemplateFromGguf(file: GgufFile): ChatTemplate {
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
  });
}
