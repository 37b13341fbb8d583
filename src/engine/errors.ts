import { NeuronError } from "../common/errors.ts";

export type EngineErrorCode =
  | "invalid_request"
  | "context_length_exceeded"
  | "template_unavailable"
  | "template_render_failed"
  | "engine_closed"
  | "engine_crashed";

/** A request the engine cannot run, or an engine that cannot run any more. */
export class EngineError extends NeuronError {
  override readonly code: EngineErrorCode;

  constructor(code: EngineErrorCode, message: string) {
    super(code, message);
    this.code = code;
  }
}
