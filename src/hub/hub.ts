/**
 * A model file from a hub repository: resolve `main` to a commit, pick the GGUF the quant
 * names, and make sure it is in the cache (downloading it if not). When the hub cannot be
 * reached, or HF_HUB_OFFLINE is set, the cache answers alone, as with huggingface_hub.
 */

import { errorMessage } from "../common/errors.ts";
import { log as rootLog, type Logger } from "../common/log.ts";
import { fileMeta, listRepo } from "./api.ts";
import { RepoCache } from "./cache.ts";
import { DEFAULT_DOWNLOAD_OPTIONS, ensureBlob } from "./download.ts";
import { HubError } from "./errors.ts";
import { repoName, type RepoRef } from "./model_ref.ts";
import type { DownloadProgress } from "./progress.ts";
import { selectGguf } from "./select.ts";
import type { HubSource } from "./sources.ts";

export interface FetchOptions {
  quant?: string | null;
  onProgress?: (p: DownloadProgress) => void;
  signal?: AbortSignal;
  log?: Logger;
  /** Overrides for tests: stall timeout and resume count. */
  download?: Partial<typeof DEFAULT_DOWNLOAD_OPTIONS>;
}

export interface ModelFile {
  /** The snapshot path to open. */
  path: string;
  repo: string;
  /** The file's name in the repository. */
  file: string;
  commit: string;
  /** Whether it was served from the cache without downloading. */
  cached: boolean;
}

export async function fetchModelFile(
  source: HubSource,
  ref: RepoRef,
  opts: FetchOptions = {},
): Promise<ModelFile> {
  const repo = repoName(ref);
  const log = (opts.log ?? rootLog).child({ repo, source: source.scheme });
  const cache = new RepoCache(source.cacheDir, ref);
  if (source.offline) return await fromCache(cache, repo, opts.quant, "HF_HUB_OFFLINE is set");

  let listing;
  try {
    listing = await listRepo(source, ref, opts.signal);
  } catch (err) {
    if (!(err instanceof HubError) || err.code !== "hub_unreachable") throw err;
    try {
      const hit = await fromCache(cache, repo, opts.quant, errorMessage(err));
      log.warn("hub unreachable; using the cached copy", {
        error: errorMessage(err),
        file: hit.file,
      });
      return hit;
    } catch (cacheErr) {
      // The cache cannot stand in; the network failure is the reason (and worth a retry).
      if (cacheErr instanceof HubError) throw err;
      throw cacheErr;
    }
  }

  const file = selectGguf(repo, listing.files, opts.quant);
  const cached = await cache.cachedFile(listing.commit, file);
  if (cached) {
    if (await cache.readRef() !== listing.commit) await cache.writeRef(listing.commit);
    log.info("model file in cache", { file, commit: listing.commit });
    return { path: cached, repo, file, commit: listing.commit, cached: true };
  }

  const meta = await fileMeta(source, ref, listing.commit, file, opts.signal);
  await ensureBlob(
    source,
    ref,
    file,
    meta,
    cache.blobPath(meta.etag),
    cache.lockPath(meta.etag),
    { ...DEFAULT_DOWNLOAD_OPTIONS, ...opts.download, log, signal: opts.signal },
    opts.onProgress,
  );
  const path = await cache.link(listing.commit, file, meta.etag);
  await cache.writeRef(listing.commit);
  return { path, repo, file, commit: listing.commit, cached: false };
}

/** The file as the cache has it at `refs/main`, with no network. */
async function fromCache(
  cache: RepoCache,
  repo: string,
  quant: string | null | undefined,
  why: string,
): Promise<ModelFile> {
  const commit = await cache.readRef();
  const files = commit ? await cache.snapshotFiles(commit) : [];
  if (!commit || !files.some((f) => f.toLowerCase().endsWith(".gguf"))) {
    throw new HubError(
      "not_cached",
      `${repo} is not in the cache at ${cache.root} and the hub cannot be used (${why})`,
    );
  }
  const file = selectGguf(`${repo} (cached)`, files, quant);
  return { path: cache.snapshotPath(commit, file), repo, file, commit, cached: true };
}
