/** Harnesses: where models run (in-process engine or an external OpenAI-compatible server). */
export type {
  Harness,
  HarnessContext,
  HarnessHealth,
  HarnessKind,
  HistogramSnapshot,
  InferenceCall,
  InferenceRoute,
  LoadProgress,
  LoadProgressDetail,
  ModelInfo,
  ModelStats,
  ModelStatus,
  SchedulerStats,
} from "./harness.ts";
export { HarnessError, type HarnessErrorCode } from "./errors.ts";
export { HarnessRegistry } from "./registry.ts";
export { NativeHarness } from "./native/mod.ts";
export { ExternalHarness } from "./external.ts";
export { passThrough } from "./proxy.ts";
