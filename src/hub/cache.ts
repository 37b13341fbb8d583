/**
 * The Hugging Face cache layout, shared with Python tools:
 *   models--{org}--{name}/blobs/{etag}                 file contents, named by etag (sha256 for LFS)
 *   models--{org}--{name}/snapshots/{commit}/{file}    relative symlink to the blob
 *   models--{org}--{name}/refs/{revision}              the commit a branch or tag pointed to
 *   .locks/models--{org}--{name}/{etag}.lock           taken while a blob is written
 * A blob appears under its name only once complete and verified (written as
 * `{etag}.incomplete` first), and a snapshot entry only once its blob is there. Where the
 * cache directory is group-writable (a cache shared by several users' tools), what is made
 * in it is group-writable too, as huggingface_hub makes its lock files (0664).
 */

import { errorMessage } from "../common/errors.ts";
import { HubError } from "./errors.ts";
import type { RepoRef } from "./model_ref.ts";

export class RepoCache {
  readonly root: string;
  readonly dir: string;
  readonly folder: string;
  #shared: Promise<boolean> | undefined;

  constructor(cacheDir: string, ref: RepoRef) {
    this.root = cacheDir.replace(/\/+$/, "");
    this.folder = `models--${ref.org}--${ref.name}`;
    this.dir = `${this.root}/${this.folder}`;
  }

  blobPath(etag: string): string {
    return `${this.dir}/blobs/${etag}`;
  }

  lockPath(etag: string): string {
    return `${this.root}/.locks/${this.folder}/${etag}.lock`;
  }

  snapshotPath(commit: string, file: string): string {
    return `${this.dir}/snapshots/${commit}/${file}`;
  }

  /** Whether the cache directory is group-writable, so what is made in it must be too. */
  shared(): Promise<boolean> {
    this.#shared ??= Deno.stat(this.root).then(
      (s) => ((s.mode ?? 0) & 0o020) !== 0,
      () => false,
    );
    return this.#shared;
  }

  /** Makes `path` (inside the cache) and the folders above it that are missing. */
  async makeDir(path: string): Promise<void> {
    await Deno.mkdir(this.root, { recursive: true });
    const shared = await this.shared();
    let at = this.root;
    for (const part of path.slice(this.root.length + 1).split("/").filter(Boolean)) {
      at = `${at}/${part}`;
      try {
        await Deno.mkdir(at);
      } catch (err) {
        if (err instanceof Deno.errors.AlreadyExists) continue;
        throw err;
      }
      if (shared) await addMode(at, 0o070);
    }
  }

  /** A file this process made: group-readable and writable when the cache is shared. */
  async share(path: string): Promise<void> {
    if (await this.shared()) await addMode(path, 0o060);
  }

  async readRef(ref = "main"): Promise<string | null> {
    try {
      const text = (await Deno.readTextFile(`${this.dir}/refs/${ref}`)).trim();
      return text || null;
    } catch {
      return null;
    }
  }

  async writeRef(commit: string, ref = "main"): Promise<void> {
    await guard(`writing refs/${ref}`, async () => {
      const path = `${this.dir}/refs/${ref}`;
      const dir = path.slice(0, path.lastIndexOf("/"));
      await this.makeDir(dir);
      const tmp = `${dir}/.${path.slice(dir.length + 1)}.${crypto.randomUUID()}`;
      await Deno.writeTextFile(tmp, commit);
      await this.share(tmp);
      await Deno.rename(tmp, path);
    });
  }

  /** The snapshot entry, when it resolves to a complete blob. */
  async cachedFile(commit: string, file: string): Promise<string | null> {
    const path = this.snapshotPath(commit, file);
    try {
      return (await Deno.stat(path)).isFile ? path : null;
    } catch {
      return null;
    }
  }

  /** Every file of a snapshot whose blob is present, relative to the snapshot, sorted. */
  async snapshotFiles(commit: string): Promise<string[]> {
    const base = `${this.dir}/snapshots/${commit}`;
    const out: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      let entries: Deno.DirEntry[];
      try {
        entries = await Array.fromAsync(Deno.readDir(rel ? `${base}/${rel}` : base));
      } catch {
        return;
      }
      for (const e of entries) {
        const path = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory) await walk(path);
        else if (await this.cachedFile(commit, path)) out.push(path);
      }
    };
    await walk("");
    return out.sort();
  }

  /** Points `snapshots/{commit}/{file}` at `blobs/{etag}` (relative, replaced atomically). */
  async link(commit: string, file: string, etag: string): Promise<string> {
    const path = this.snapshotPath(commit, file);
    await guard(`linking ${file}`, async () => {
      const dir = path.slice(0, path.lastIndexOf("/"));
      await this.makeDir(dir);
      const depth = file.split("/").length - 1;
      const target = `${"../".repeat(2 + depth)}blobs/${etag}`;
      const tmp = `${dir}/.${crypto.randomUUID()}.link`;
      await Deno.symlink(target, tmp);
      await Deno.rename(tmp, path);
    });
    return path;
  }
}

async function addMode(path: string, bits: number): Promise<void> {
  const mode = (await Deno.stat(path)).mode ?? 0;
  if ((mode & bits) !== bits) await Deno.chmod(path, (mode & 0o7777) | bits);
}

/** Runs a cache write; a filesystem failure becomes a `cache_error` naming what was done. */
export async function guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof HubError) throw err;
    throw new HubError("cache_error", `hub cache: ${what}: ${errorMessage(err)}`, { cause: err });
  }
}
