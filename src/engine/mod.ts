/** The engine: one Worker per loaded model, its scheduler, sampler and generation loop. */
export { EngineHost, EngineLoadError, EngineRequestError, GenerationStream } from "./host.ts";
export { EngineError, type EngineErrorCode } from "./errors.ts";
export type * from "./protocol.ts";
export { GREEDY, type SamplingParams } from "./sampler.ts";
