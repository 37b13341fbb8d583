import { NeuronError } from "../common/errors.ts";

export type FrontEndErrorCode =
  /** The prompt has more tokens than the context holds, as its bytes alone prove. */
  | "context_length_exceeded"
  | "template_unavailable"
  | "template_render_failed"
  /** The template ran past its render budget (chat/render_budget.ts). */
  | "chat_template_failed";

/** A chat request the model's template cannot turn into a prompt. */
export class FrontEndError extends NeuronError {
  override readonly code: FrontEndErrorCode;

  constructor(code: FrontEndErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.code = code;
  }
}
