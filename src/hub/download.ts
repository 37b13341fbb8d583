/**
 * Writing one blob: streamed to `{blob}.incomplete`, resumed with `Range` from what is
 * already there (after a cut connection, or a previous run), hashed as it is written,
 * checked against the advertised size and sha256, then renamed into place. A stalled
 * connection counts as cut. One writer per blob: in this process by sharing the promise,
 * across processes (other neurons, Python tools) by the cache's lock file.
 */

import { createHash, type Hash } from "node:crypto";
import { BlockBuffer } from "../common/block_buffer.ts";
import { errorMessage } from "../common/errors.ts";
import type { Logger } from "../common/log.ts";
import { type FileMeta, hubFetch } from "./api.ts";
import { guard } from "./cache.ts";
import { HubError } from "./errors.ts";
import type { RepoRef } from "./model_ref.ts";
import { type DownloadProgress, ProgressMeter } from "./progress.ts";
import type { HubSource } from "./sources.ts";

export interface DownloadOptions {
  /** A connection that delivers nothing for this long is cut and resumed. */
  stallTimeoutMs: number;
  /** Resumes within one download after cut connections. */
  maxResumes: number;
  log: Logger;
  signal?: AbortSignal;
}

export const DEFAULT_DOWNLOAD_OPTIONS = { stallTimeoutMs: 60_000, maxResumes: 5 };

interface Flight {
  promise: Promise<void>;
  listeners: Set<(p: DownloadProgress) => void>;
}

const flights = new Map<string, Flight>();

/** Downloads `meta` into `blob` unless it is there already; concurrent calls share one. */
export function ensureBlob(
  source: HubSource,
  ref: RepoRef,
  file: string,
  meta: FileMeta,
  blob: string,
  lock: string,
  opts: DownloadOptions,
  onProgress?: (p: DownloadProgress) => void,
): Promise<void> {
  let flight = flights.get(blob);
  if (!flight) {
    const listeners = new Set<(p: DownloadProgress) => void>();
    const promise = locked(lock, async () => {
      if (await complete(blob, meta.size)) return;
      await download(source, ref, file, meta, blob, opts, (p) => listeners.forEach((l) => l(p)));
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

async function locked(lockPath: string, fn: () => Promise<void>): Promise<void> {
  const lock = await guard("taking the download lock", async () => {
    await Deno.mkdir(lockPath.slice(0, lockPath.lastIndexOf("/")), { recursive: true });
    const f = await Deno.open(lockPath, { create: true, write: true });
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
  source: HubSource,
  ref: RepoRef,
  file: string,
  meta: FileMeta,
  blob: string,
  opts: DownloadOptions,
  onProgress: (p: DownloadProgress) => void,
): Promise<void> {
  await guard(
    "creating blobs/",
    () => Deno.mkdir(blob.slice(0, blob.lastIndexOf("/")), { recursive: true }),
  );
  const state: PartialBlob = { path: `${blob}.incomplete`, have: 0, hash: createHash("sha256") };
  state.have = await hashExisting(state.path, state.hash);
  if (state.have > meta.size) await restart(state);
  const meter = new ProgressMeter(file, meta.size, opts.log, onProgress);
  meter.start(state.have);
  if (state.have > 0) {
    opts.log.info("resuming download", { file, from: state.have, total: meta.size });
  } else opts.log.info("downloading", { file, total: meta.size, url: meta.url });

  let resumes = 0;
  while (state.have < meta.size) {
    const before = state.have;
    try {
      const more = await fetchRange(source, ref, file, meta.url, state, meter, opts);
      if (!more && state.have < meta.size) break;
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      if (!(err instanceof HubError) || err.code !== "hub_unreachable") throw err;
      if (state.have <= before || resumes >= opts.maxResumes) throw err;
      resumes++;
      opts.log.warn("download interrupted; resuming", {
        file,
        at: state.have,
        error: errorMessage(err),
      });
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
  if (!meta.sha256) opts.log.warn("no sha256 advertised; size checked only", { file });
  await guard("moving the blob into place", () => Deno.rename(state.path, blob));
  opts.log.info("downloaded", { file, bytes: state.have, sha256: digest });
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
  source: HubSource,
  ref: RepoRef,
  file: string,
  url: string,
  state: PartialBlob,
  meter: ProgressMeter,
  opts: DownloadOptions,
): Promise<boolean> {
  const stall = new AbortController();
  let timer = setTimeout(() => stall.abort(), opts.stallTimeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, stall.signal]) : stall.signal;
  try {
    const ranged = state.have > 0;
    const res = await hubFetch(
      source,
      ref,
      url,
      { headers: ranged ? { range: `bytes=${state.have}-` } : {}, signal },
      `downloading ${file}`,
    );
    if (res.status !== 200 && res.status !== 206) {
      // 416 or a redirect we cannot follow: what we hold is not a prefix we can extend.
      await res.body?.cancel();
      await restart(state);
      meter.start(0);
      if (!ranged) {
        throw new HubError("hub_error", `downloading ${file}: HTTP ${res.status}`);
      }
      return true;
    }
    if (ranged && res.status === 200) {
      // The server ignored the range and sends the whole file: start over.
      await restart(state);
      meter.start(0);
    }
    if (!res.body) return false;
    const out = await guard(
      "opening the partial blob",
      () => Deno.open(state.path, { create: true, append: true }),
    );
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
        clearTimeout(timer);
        timer = setTimeout(() => stall.abort(), opts.stallTimeoutMs);
        for (const block of blocks.fill(chunk)) await append(block);
        received += chunk.length;
        meter.advance(chunk.length);
      }
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      throw new HubError(
        "hub_unreachable",
        `downloading ${file}: connection lost at byte ${state.have}: ${
          stall.signal.aborted ? `no data for ${opts.stallTimeoutMs} ms` : errorMessage(err)
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
