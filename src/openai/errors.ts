import { NeuronError } from "../common/errors.ts";

/**
 * Why an OpenAI request was refused before any work started, both 400:
 * `invalid_request_body` is a field of the wrong shape or past a limit; `invalid_request` is
 * a well-formed request this node cannot honour (n > 1, image parts to a text model, an
 * unsupported option). `param` names the offending field, as OpenAI's envelope does.
 */
export type OpenAiErrorCode = "invalid_request_body" | "invalid_request";

export class OpenAiError extends NeuronError {
  declare readonly code: OpenAiErrorCode;
  readonly param: string | null;

  constructor(code: OpenAiErrorCode, message: string, param: string | null = null) {
    super(code, message);
    this.param = param;
  }
}

/** A well-formed request asking for something this node does not do. */
export function unsupported(param: string, message: string): OpenAiError {
  return new OpenAiError("invalid_request", message, param);
}

/**
 * Generation stopped with an error after the request was accepted (the engine failed, the
 * model was unloaded, the node is going down). Keeps the generator's code.
 */
export class GenerationError extends NeuronError {}

/** The events ended without a result: the generation was stopped (client gone, node stopping). */
export function endedEarly(): GenerationError {
  return new GenerationError("request_cancelled", "the generation was stopped before it finished");
}

/** A whole answer cannot be given for a generation that ended `cancelled` or `error`. */
export function unfinished(done: { fault?: { code: string; message: string } }): GenerationError {
  return done.fault ? new GenerationError(done.fault.code, done.fault.message) : endedEarly();
}

/** Whether a generation ended without finishing: the node or the client stopped it. */
export function cutShort(reason: string): boolean {
  return reason === "cancelled" || reason === "error";
}
