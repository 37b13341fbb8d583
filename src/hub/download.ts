/**
 * Writing one blob: streamed to `{blob}.incomplete` in bounded memory (whole aligned
 * blocks), resumed with `Range` from what is already there (after a cut connection, or a
 * previous run), hashed as it is written, checked against the advertised size and sha256,
 * then renamed into place. Every GET carries a Range, the first one `bytes=0-` (the Xet
 * bridge refuses unranged GETs of large files). A stalled connection counts as cut. The
 * signed URL the hub redirected to expires (about an hour): when its host refuses it (403,
 * 410), the hub is asked for a fresh one and the download resumes from the bytes on disk.
 * One writer per blob: in this process by sharing the promise, across processes (other
 * neurons, Python tools) by the cache's lock file.
 */

import { createHash, type Hash } from "node:crypto";
import { BlockBuffer } from "../common/block_buffer.ts";
import { errorMessage } from "../common/errors.ts";
import type { FileMeta } from "./api.ts";
import { guard, type RepoCache } from "./cache.ts";
import { HubError } from "./errors.ts";
import { type HubCall, hubFetch } from "./http.ts";
import { type DownloadProgress, ProgressMeter } from "./progress.ts";
import { redactUrls, urlForLog } from "./redact.ts";

export interface DownloadOptions {
  /** A connection that delivers nothing for this long is cut and resumed. */
  stallTimeoutMs: number;
  /** Resumes within one download after cut connections, and fresh URLs after refusals. */
  maxResumes: number;
}

export const DEFAULT_DOWNLOAD_OPTIONS: DownloadOptions = { stallTimeoutMs: 60_000, maxResumes: 5 };

/** One file to bring into the cache. */
export interface BlobJob {
  /** The download's requests (its `what` names the file). */
  call: HubCall;
  file: string;
  meta: FileMeta;
  cache: RepoCache;
  /** Asks the hub again for the file's metadata: a fresh signed URL. */
  refresh: () => Promise<FileMeta>;
  options: DownloadOptions;
}

interface Flight {
  promise: Promise<void>;
  listeners: Set<(p: DownloadProgress) => void>;
}

const flights = new Map<string, Flight>();

/** Downloads the job's blob unless it is there already; concurrent calls share one. */
export function ensureBlob(
  job: BlobJob,
  onProgress?: (p: DownloadProgress) => void,
): Promise<void> {
  const blob = job.cache.blobPath(job.meta.etag);
  let flight = flights.get(blob);
  if (!flight) {
    const listeners = new Set<(p: DownloadProgress) => void>();
    const promise = locked(job.cache, job.cache.lockPath(job.meta.etag), async () => {
      if (await complete(blob, job.meta.size)) return;
      await download(job, blob, (p) => listeners.forEach((l) => l(p)));
    }).finally(() => flights.delete(blob));
    flight = { promise, listeners };
    flights.set(blob, flight);
  }
  if (onProgress) flight.listeners.add(onProgress);
  return flight.promise;
}

async function complete(path: string, size: number): Promise<boolean> {
  try {
    return (await Deno.stat(path)).size === size;
  } catch {
    return false;
  }
}

async function locked(cache: RepoCache, lockPath: string, fn: () => Promise<void>): Promise<void> {
  const lock = await guard("taking the download lock", async () => {
    await cache.makeDir(lockPath.slice(0, lockPath.lastIndexOf("/")));
    const f = await Deno.open(lockPath, { create: true, write: true });
    await cache.share(lockPath).catch(() => {});
    await f.lock(true);
    return f;
  });
  try {
    await fn();
  } finally {
    try {
      await lock.unlock();
    } finally {
      lock.close();
    }
  }
}

/** Hashes what a previous attempt left, so the final sha256 covers the whole file. */
async function hashExisting(path: string, hash: Hash): Promise<number> {
  let f: Deno.FsFile;
  try {
    f = await Deno.open(path, { read: true });
  } catch {
    return 0;
  }
  let n = 0;
  for await (const chunk of f.readable) {
    hash.update(chunk);
    n += chunk.length;
  }
  return n;
}

/** What is on disk so far, and its running hash; kept in step with every write. */
interface PartialBlob {
  path: string;
  have: number;
  hash: Hash;
}

async function download(
  job: BlobJob,
  blob: string,
  onProgress: (p: DownloadProgress) => void,
): Promise<void> {
  const { call, file, options } = job;
  let meta = job.meta;
  const log = call.log;
  await guard("creating blobs/", () => job.cache.makeDir(blob.slice(0, blob.lastIndexOf("/"))));
  const state: PartialBlob = { path: `${blob}.incomplete`, have: 0, hash: createHash("sha256") };
  state.have = await hashExisting(state.path, state.hash);
  if (state.have > meta.size) await restart(state);
  const meter = new ProgressMeter(file, meta.size, log, onProgress);
  meter.start(state.have);
  if (state.have > 0) {
    log.info("resuming download", { file, from: state.have, total: meta.size });
  } else log.info("downloading", { file, total: meta.size, from: urlForLog(meta.url) });

  let resumes = 0;
  while (state.have < meta.size) {
    const before = state.have;
    try {
      const more = await fetchRange(job, meta.url, state, meter);
      if (!more && state.have < meta.size) break;
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason ?? err;
      if (!(err instanceof HubError) || resumes >= options.maxResumes) throw err;
      if (err.code === "download_refused") {
        resumes++;
        log.warn("download URL refused; asking the hub for a fresh one", {
          file,
          at: state.have,
          error: err.message,
        });
        meta = await fresh(job, meta);
        continue;
      }
      if (err.code !== "hub_unreachable" || state.have <= before) throw err;
      resumes++;
      log.warn("download interrupted; resuming", { file, at: state.have, error: err.message });
    }
  }
  meter.finish();
  if (state.have !== meta.size) {
    await Deno.remove(state.path).catch(() => {});
    throw new HubError(
      "integrity_failed",
      `${file}: got ${state.have} bytes, the hub said ${meta.size}; the download was discarded`,
    );
  }
  const digest = state.hash.digest("hex");
  if (meta.sha256 && digest !== meta.sha256) {
    await Deno.remove(state.path).catch(() => {});
    throw new HubError(
      "integrity_failed",
      `${file}: sha256 ${digest} does not match the ${meta.sha256} the hub advertises; ` +
        "the download was discarded",
    );
  }
  if (!meta.sha256) log.warn("no sha256 advertised; size checked only", { file });
  await guard("moving the blob into place", async () => {
    await job.cache.share(state.path);
    await Deno.rename(state.path, blob);
  });
  log.info("downloaded", { file, bytes: state.have, sha256: digest });
}

/** The file's metadata asked for again; it must still describe the same bytes. */
async function fresh(job: BlobJob, meta: FileMeta): Promise<FileMeta> {
  const next = await job.refresh();
  if (next.etag !== meta.etag || next.size !== meta.size) {
    throw new HubError(
      "hub_error",
      `${job.file}: the hub now describes another file (etag ${next.etag}, ${next.size} bytes; ` +
        `was ${meta.etag}, ${meta.size} bytes)`,
    );
  }
  return next;
}

async function restart(state: PartialBlob): Promise<void> {
  await guard("truncating the partial blob", () =>
    Deno.truncate(state.path, 0).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }));
  state.have = 0;
  state.hash = createHash("sha256");
}

/**
 * One GET from `state.have` on, appending what arrives until the body ends (true) or the
 * server sent nothing more to append (false). A broken body throws `hub_unreachable`.
 */
async function fetchRange(
  job: BlobJob,
  url: string,
  state: PartialBlob,
  meter: ProgressMeter,
): Promise<boolean> {
  const { call, options } = job;
  let stall = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    clearTimeout(timer);
    const current = stall;
    timer = setTimeout(() => current.abort(), options.stallTimeoutMs);
  };
  const signal = () => {
    stall = new AbortController();
    arm();
    return call.signal ? AbortSignal.any([call.signal, stall.signal]) : stall.signal;
  };
  try {
    const from = state.have;
    const res = await hubFetch(call, url, { headers: { range: `bytes=${from}-` } }, signal);
    if (res.status !== 200 && res.status !== 206) {
      // 416 or a redirect we cannot follow: what we hold is not a prefix we can extend.
      await res.body?.cancel();
      await restart(state);
      meter.start(0);
      if (from === 0) {
        throw new HubError(
          "hub_error",
          `${call.what}: ${urlForLog(url)} answered HTTP ${res.status}`,
        );
      }
      return true;
    }
    if (from > 0 && res.status === 200) {
      // The server ignored the range and sends the whole file: start over.
      await restart(state);
      meter.start(0);
    }
    if (!res.body) return false;
    const out = await guard("opening the partial blob", async () => {
      const f = await Deno.open(state.path, { create: true, append: true });
      if (state.have === 0) await job.cache.share(state.path);
      return f;
    });
    let received = 0;
    // Whole aligned blocks, so that the model lands in the page cache in huge folios.
    const blocks = new BlockBuffer(state.have);
    const append = async (bytes: Uint8Array) => {
      await writeAll(out, bytes);
      state.hash.update(bytes);
      state.have += bytes.length;
    };
    try {
      for await (const chunk of res.body) {
        arm();
        for (const block of blocks.fill(chunk)) await append(block);
        received += chunk.length;
        meter.advance(chunk.length);
      }
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason ?? err;
      throw new HubError(
        "hub_unreachable",
        `${call.what}: connection to ${new URL(url).host} lost at byte ${state.have}: ${
          stall.signal.aborted
            ? `no data for ${options.stallTimeoutMs} ms`
            : redactUrls(errorMessage(err))
        }`,
        { cause: err },
      );
    } finally {
      try {
        await append(blocks.rest());
      } finally {
        out.close();
      }
    }
    return received > 0;
  } finally {
    clearTimeout(timer);
  }
}

async function writeAll(f: Deno.FsFile, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.length) off += await f.write(chunk.subarray(off));
}
