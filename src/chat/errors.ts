import { NeuronError } from "../common/errors.ts";

/** Stable codes for chat templating failures. */
export type ChatErrorCode =
  /** The model file has no `tokenizer.chat_template`. */
  | "template_missing"
  /** The template does not parse, or raised an error while rendering these messages. */
  | "template_render_failed"
  /** The template ran past its time or size budget (render_budget.ts). */
  | "chat_template_failed"
  /** Messages, tools or kwargs are not in the OpenAI shape. */
  | "invalid_request";

export class ChatError extends NeuronError {
  override readonly code: ChatErrorCode;

  constructor(code: ChatErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.code = code;
  }
}
