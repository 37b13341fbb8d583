import { NeuronError } from "../common/errors.ts";

export type FrontEndErrorCode = "template_unavailable" | "template_render_failed";

/** A chat request the model's template cannot turn into a prompt. */
export class FrontEndError extends NeuronError {
  override readonly code: FrontEndErrorCode;

  constructor(code: FrontEndErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.code = code;
  }
}
