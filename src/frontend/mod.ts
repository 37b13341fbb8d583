/**
 * The front end: text in and out of the engine core. Chat template and tokenizer on the
 * way in (with the prompt's reuse boundary for the prefix cache); incremental detokenizing,
 * stop strings and the reasoning / tool-call parser on the way out, as generation events.
 */
export { addedSpecials, FrontEnd, type Pause, type PreparedRequest } from "./front_end.ts";
export { FrontEndError, type FrontEndErrorCode } from "./errors.ts";
export type * from "./events.ts";
export { RequestOutput, type RequestOutputOptions } from "./output.ts";
