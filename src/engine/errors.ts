import { NeuronError } from "../common/errors.ts";

export type EngineErrorCode = "invalid_request" | "context_length_exceeded";

/** A request the engine core cannot run: its prompt is empty, out of range or too long. */
export class EngineError extends NeuronError {
  override readonly code: EngineErrorCode;

  constructor(code: EngineErrorCode, message: string) {
    super(code, message);
    this.code = code;
  }
}
