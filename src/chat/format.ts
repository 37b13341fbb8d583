/**
 * How a model writes tool calls and reasoning, read from its chat template the way
 * llama.cpp's common/chat.cpp tells formats apart: by markers in the template source, in
 * llama.cpp's order (a template that names `<tool_call>` is Hermes even on a Llama base).
 * - Hermes (`<tool_call>`): Qwen2.5, Qwen3, Hermes 2/3; Qwen3-Coder's XML body included.
 * - Llama 3.x (an `ipython` turn or `<|python_tag|>`): Llama 3.1, 3.2, 3.3.
 * - Mistral (`[TOOL_CALLS]`): Mistral 7B v0.3, Nemo, Mixtral 8x22B.
 * - none: Gemma 3 and every template without a tool-call syntax; tools stay plain text.
 * Reasoning in `<think>…</think>` is read only where the template knows `</think>` (Qwen3
 * and its kin): a Llama, Mistral or Gemma model writing `<think>` writes content.
 */

import { PYTHON_TAG } from "./llama3_calls.ts";
import { newMistralCallId, TOOL_CALLS } from "./mistral_calls.ts";
import { THINK_CLOSE } from "./reasoning.ts";
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "./tool_calls.ts";

export type ToolCallSyntax = "hermes" | "llama3" | "mistral" | "none";

export interface ChatFormat {
  toolCalls: ToolCallSyntax;
  /** The template knows `<think>` blocks. */
  reasoning: boolean;
  /** Control tokens whose text the tool-call reader must see (llama.cpp's preserved tokens). */
  preservedTokens: readonly string[];
  /** An id for a call the model wrote without one, where the template needs a given form. */
  newToolCallId?: () => string;
}

const LLAMA3_MARKERS = ["<|start_header_id|>ipython<|end_header_id|>", PYTHON_TAG];

/** The format of the model whose chat template is `source`. */
export function detectChatFormat(source: string): ChatFormat {
  const reasoning = source.includes(THINK_CLOSE);
  if (source.includes(TOOL_CALL_OPEN)) {
    return { toolCalls: "hermes", reasoning, preservedTokens: [TOOL_CALL_OPEN, TOOL_CALL_CLOSE] };
  }
  if (LLAMA3_MARKERS.some((marker) => source.includes(marker))) {
    return { toolCalls: "llama3", reasoning, preservedTokens: [PYTHON_TAG] };
  }
  if (source.includes(TOOL_CALLS)) {
    return {
      toolCalls: "mistral",
      reasoning,
      preservedTokens: [TOOL_CALLS],
      newToolCallId: newMistralCallId,
    };
  }
  return { toolCalls: "none", reasoning, preservedTokens: [] };
}
