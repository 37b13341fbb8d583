/**
 * A model from a hub repository: resolve the revision (`main` unless told) to a commit,
 * pick the GGUF the quant names (every part of a split one), and make sure it is in the
 * cache, downloading what is not. When the hub refuses or fails (401, 403, 404, 429, 5xx,
 * no network) and the cache holds the model for that revision, the cached copy is used and
 * the log says why, as with huggingface_hub; with HF_HUB_OFFLINE the cache answers alone.
 * Otherwise a refusal worth waiting out is retried within the fetch's retry budget.
 */

import { log as rootLog, type Logger } from "../common/log.ts";
import { type FileMeta, fileMeta, listRepo } from "./api.ts";
import { RepoCache } from "./cache.ts";
import { DEFAULT_DOWNLOAD_OPTIONS, type DownloadOptions, ensureBlob } from "./download.ts";
import { CACHE_FALLBACK_CODES, HubError, RETRYABLE_HUB_CODES } from "./errors.ts";
import type { HubCall } from "./http.ts";
import { COMMIT, repoName, type RepoRef, revisionOf } from "./model_ref.ts";
import type { DownloadProgress } from "./progress.ts";
import { DEFAULT_RETRY_POLICY, RetryBudget, type RetryPolicy } from "./retry.ts";
import { type GgufChoice, selectGguf } from "./select.ts";
import type { HubSource } from "./sources.ts";

export interface FetchOptions {
  quant?: string | null;
  onProgress?: (p: DownloadProgress) => void;
  signal?: AbortSignal;
  log?: Logger;
  /** Stall timeout and resume count. */
  download?: Partial<DownloadOptions>;
  /** How long to wait out a busy hub, in all (retry.ts). */
  retry?: Partial<RetryPolicy>;
}

export interface ModelFile {
  /** The snapshot path to open (a split model's first part). */
  path: string;
  repo: string;
  /** The file's name in the repository. */
  file: string;
  /** Every file of the model in the repository: `[file]`, or a split model's parts. */
  files: string[];
  commit: string;
  /** Whether it was served from the cache without downloading. */
  cached: boolean;
}

/** What the hub said the model is, with what the cache lacks of it. */
interface Plan {
  commit: string;
  choice: GgufChoice;
  /** Metadata of the parts to download; parts already cached are absent. */
  metas: Map<string, FileMeta>;
}

interface Context {
  source: HubSource;
  ref: RepoRef;
  cache: RepoCache;
  opts: FetchOptions;
  log: Logger;
  budget: RetryBudget;
}

function call(ctx: Context, what: string, patient: boolean): HubCall {
  const { source, ref, log, opts, budget } = ctx;
  return { source, ref, what, log, signal: opts.signal, budget: patient ? budget : null };
}

export async function fetchModelFile(
  source: HubSource,
  ref: RepoRef,
  opts: FetchOptions = {},
): Promise<ModelFile> {
  const repo = repoName(ref);
  const log = (opts.log ?? rootLog).child({
    repo,
    source: source.scheme,
    revision: revisionOf(ref),
  });
  const cache = new RepoCache(source.cacheDir, ref);
  if (source.offline) return await fromCache(cache, ref, opts.quant, "HF_HUB_OFFLINE is set");
  const budget = new RetryBudget({ ...DEFAULT_RETRY_POLICY, ...opts.retry });
  const ctx: Context = { source, ref, cache, opts, log, budget };

  let plan: Plan | ModelFile;
  try {
    plan = await resolve(ctx, false);
  } catch (err) {
    if (!(err instanceof HubError) || !CACHE_FALLBACK_CODES.has(err.code)) throw err;
    const hit = await fromCache(cache, ref, opts.quant, err.message).catch((cacheErr) => {
      if (cacheErr instanceof HubError) return null;
      throw cacheErr;
    });
    if (hit) {
      log.warn("the hub refused; using the cached copy", {
        status: err.status ?? null,
        error: err.message,
        file: hit.file,
        commit: hit.commit,
      });
      return hit;
    }
    if (!RETRYABLE_HUB_CODES.has(err.code)) throw err;
    plan = await resolve(ctx, true);
  }
  if (!("choice" in plan)) return plan;
  return await download(ctx, plan);
}

/** The commit and model the hub names; the cached model when the cache holds all of it. */
async function resolve(ctx: Context, patient: boolean): Promise<Plan | ModelFile> {
  const { ref, cache, log, opts } = ctx;
  const repo = repoName(ref);
  const listing = await listRepo(call(ctx, "listing", patient));
  const choice = selectGguf(repo, listing.files, opts.quant);
  const metas = new Map<string, FileMeta>();
  for (const part of choice.parts) {
    if (await cache.cachedFile(listing.commit, part)) continue;
    metas.set(part, await fileMeta(call(ctx, `resolving ${part}`, patient), listing.commit, part));
  }
  if (metas.size > 0) return { commit: listing.commit, choice, metas };
  await recordRevision(ctx, listing.commit).catch((err) =>
    log.warn("could not record the revision in the cache", { error: String(err) })
  );
  log.info("model file in cache", { file: choice.file, commit: listing.commit });
  return modelFile(ctx, listing.commit, choice, true);
}

async function download(ctx: Context, plan: Plan): Promise<ModelFile> {
  const { cache, opts, log } = ctx;
  const { commit, choice } = plan;
  const sizes = await Promise.all(choice.parts.map(async (part) => {
    const meta = plan.metas.get(part);
    return meta ? meta.size : (await Deno.stat(cache.snapshotPath(commit, part))).size;
  }));
  const total = sizes.reduce((a, b) => a + b, 0);
  let done = 0;
  for (const [i, part] of choice.parts.entries()) {
    const meta = plan.metas.get(part);
    if (meta) {
      const base = done;
      const downloading = call(ctx, `downloading ${part}`, true);
      await ensureBlob({
        call: downloading,
        file: part,
        meta,
        cache,
        refresh: () => fileMeta(call(ctx, `resolving ${part}`, true), commit, part),
        options: { ...DEFAULT_DOWNLOAD_OPTIONS, ...opts.download },
      }, (p) => opts.onProgress?.(overall(p, choice.file, base, total)));
      await cache.link(commit, part, meta.etag);
    }
    done += sizes[i];
  }
  await recordRevision(ctx, commit);
  log.info("model ready in cache", { file: choice.file, parts: choice.parts.length, commit });
  return modelFile(ctx, commit, choice, false);
}

/** One part's progress as the whole model's. */
function overall(p: DownloadProgress, file: string, base: number, total: number): DownloadProgress {
  const bytes = base + p.bytes;
  return {
    file,
    bytes,
    total,
    bytesPerSec: p.bytesPerSec,
    etaSecs: p.bytesPerSec > 0 ? Math.max(0, total - bytes) / p.bytesPerSec : null,
  };
}

/** `refs/{revision}` -> commit, unless the revision is that commit (as huggingface_hub). */
async function recordRevision(ctx: Context, commit: string): Promise<void> {
  const revision = revisionOf(ctx.ref);
  if (revision === commit) return;
  if (await ctx.cache.readRef(revision) !== commit) await ctx.cache.writeRef(commit, revision);
}

function modelFile(ctx: Context, commit: string, choice: GgufChoice, cached: boolean): ModelFile {
  return {
    path: ctx.cache.snapshotPath(commit, choice.file),
    repo: repoName(ctx.ref),
    file: choice.file,
    files: choice.parts,
    commit,
    cached,
  };
}

/** The model as the cache has it for the revision, with no network. */
async function fromCache(
  cache: RepoCache,
  ref: RepoRef,
  quant: string | null | undefined,
  why: string,
): Promise<ModelFile> {
  const repo = repoName(ref);
  const revision = revisionOf(ref);
  const commit = COMMIT.test(revision) ? revision : await cache.readRef(revision);
  const files = commit ? await cache.snapshotFiles(commit) : [];
  if (!commit || !files.some((f) => f.toLowerCase().endsWith(".gguf"))) {
    throw new HubError(
      "not_cached",
      `${repo}@${revision} is not in the cache at ${cache.root} and the hub cannot be used (${why})`,
    );
  }
  const choice = selectGguf(`${repo} (cached)`, files, quant);
  return {
    path: cache.snapshotPath(commit, choice.file),
    repo,
    file: choice.file,
    files: choice.parts,
    commit,
    cached: true,
  };
}
