/**
 * The engine core: continuous batching on token ids over a model runner — scheduler, KV
 * block pool with prefix caching, sampler, step budget.
 */
export { Engine } from "./engine.ts";
export { EngineError, type EngineErrorCode } from "./errors.ts";
export type * from "./request.ts";
export type * from "./token_filter.ts";
export { GREEDY, type SampledToken, type SamplingParams, topIds } from "./sampler.ts";
export { kvPoolBlocks } from "./kv/pool_size.ts";
export { StepRows } from "./step_rows.ts";
export {
  MAX_DRAFT_TOKENS,
  MAX_NGRAM,
  SPECULATIVE_MODES,
  type SpeculativeParams,
} from "./spec/speculation.ts";
