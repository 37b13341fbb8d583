/**
 * Hugging Face hub (and compatible sources) downloads into the standard cache layout, so
 * caches are shared with other Hugging Face tools.
 */
export {
  CACHE_FALLBACK_CODES,
  HubError,
  type HubErrorCode,
  RETRYABLE_HUB_CODES,
} from "./errors.ts";
export { parseRepoRef, repoName, type RepoRef, revisionOf } from "./model_ref.ts";
export { type HubSource, isOffline, resolveSource, type SourceSettings } from "./sources.ts";
export { type GgufChoice, selectGguf } from "./select.ts";
export { RepoCache } from "./cache.ts";
export { type DownloadProgress, formatBytes } from "./progress.ts";
export { DEFAULT_RETRY_POLICY, type RetryPolicy } from "./retry.ts";
export { fetchModelFile, type FetchOptions, type ModelFile } from "./hub.ts";
