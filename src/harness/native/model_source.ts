/**
 * Where a hub `model_id` (`org/name`, `scheme:org/name`, either with `@revision`) is read
 * from: its GGUF file (a split model's first part), fetched into the cache. Paths are
 * model_path.ts's.
 */

import type { ModelSpec, NativeConfig } from "../../config/mod.ts";
import type { Logger } from "../../common/log.ts";
import {
  type DownloadProgress,
  fetchModelFile,
  parseRepoRef,
  resolveSource,
} from "../../hub/mod.ts";

export interface SourceOptions {
  env: Record<string, string>;
  signal: AbortSignal;
  log: Logger;
  onDownload: (p: DownloadProgress) => void;
}

export async function modelFile(
  spec: ModelSpec,
  config: NativeConfig,
  opts: SourceOptions,
): Promise<string> {
  const ref = parseRepoRef(spec.model_id, spec.revision);
  const source = resolveSource(
    ref.scheme,
    { hfCache: config.hf_cache, sources: config.sources },
    opts.env,
  );
  const file = await fetchModelFile(source, ref, {
    quant: spec.quant,
    signal: opts.signal,
    log: opts.log,
    onProgress: opts.onDownload,
    retry: { budgetMs: config.hub_retry_secs * 1000 },
  });
  return file.path;
}
