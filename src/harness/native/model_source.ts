/**
 * Where a `model_id` is read from: an absolute `.gguf` path inside `model_dirs`, or a hub
 * repository (`org/name`, `scheme:org/name`) fetched into the cache.
 */

import type { ModelSpec, NativeConfig } from "../../config/mod.ts";
import type { Logger } from "../../common/log.ts";
import {
  type DownloadProgress,
  fetchModelFile,
  parseRepoRef,
  resolveSource,
} from "../../hub/mod.ts";
import { allowedModelPath } from "../model_path.ts";

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
  const local = await allowedModelPath(spec.model_id, config.model_dirs);
  if (local !== null) return local;
  const ref = parseRepoRef(spec.model_id);
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
  });
  return file.path;
}
