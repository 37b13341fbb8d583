/**
 * Hugging Face hub (and compatible sources) downloads into the standard cache layout, so
 * caches are shared with other Hugging Face tools.
 */
export { HubError, type HubErrorCode, RETRYABLE_HUB_CODES } from "./errors.ts";
export { parseRepoRef, repoName, type RepoRef } from "./model_ref.ts";
export { type HubSource, isOffline, resolveSource, type SourceSettings } from "./sources.ts";
export { selectGguf } from "./select.ts";
export { RepoCache } from "./cache.ts";
export { type DownloadProgress, formatBytes } from "./progress.ts";
export { fetchModelFile, type FetchOptions, type ModelFile } from "./hub.ts";
