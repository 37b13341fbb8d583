/**
 * Files neuron needs at run time besides its code: the CPU kernel library, the CUDA PTX and
 * cubins, build_info.json. They are addressed by their path relative to the checkout root
 * (e.g. `kernels/build/libneuron_cpu.so`), and the same call works in both ways neuron runs:
 *
 * - `deno run`: the path resolves into the checkout on disk.
 * - a `deno compile`d executable: `deno task compile` embeds each asset with `--include`,
 *   and the path resolves into the executable's read-only virtual file system, because
 *   module URLs there keep the checkout's layout. Deno's own file APIs read it; native code
 *   cannot, so a library to dlopen is first extracted to a real file (`nativeAssetPath`).
 *
 * Readers: `readAsset` (bytes, e.g. PTX for cuModuleLoadData), `assetPath` (for Deno file
 * APIs: stat, readDir), `nativeAssetPath` (for Deno.dlopen).
 */

import { createHash } from "node:crypto";
import { NeuronError } from "./errors.ts";

export type AssetErrorCode =
  | "asset_invalid_path"
  | "asset_missing"
  | "asset_cache_unavailable"
  | "asset_cache_unsafe";

export class AssetError extends NeuronError {
  declare readonly code: AssetErrorCode;

  constructor(code: AssetErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

const ROOT = new URL("../../", import.meta.url);

/** Whether this process is a `deno compile`d executable (assets live inside it). */
export function isCompiled(): boolean {
  return Deno.build.standalone === true;
}

function checkRelative(relativePath: string): void {
  const segments = relativePath.split("/");
  if (
    relativePath.startsWith("/") ||
    segments.some((s) => s === "" || s === "." || s === "..")
  ) {
    throw new AssetError(
      "asset_invalid_path",
      `asset path ${JSON.stringify(relativePath)} must be relative to the checkout root, ` +
        "without empty, . or .. segments",
    );
  }
}

/** The asset's URL: in the checkout, or in the executable's embedded file system. */
export function assetUrl(relativePath: string): URL {
  checkRelative(relativePath);
  return new URL(relativePath, ROOT);
}

/** The asset's path, for Deno's file APIs (not for native code: see `nativeAssetPath`). */
export function assetPath(relativePath: string): string {
  return decodeURIComponent(assetUrl(relativePath).pathname);
}

function missing(relativePath: string, cause: unknown): AssetError {
  const hint = isCompiled()
    ? "this executable was compiled without it (deno task compile embeds what kernels/build " +
      "holds at build time)"
    : `${assetPath(relativePath)} does not exist: build it first (deno task kernels:cpu, ` +
      "kernels:cuda)";
  return new AssetError("asset_missing", `asset ${relativePath} is missing: ${hint}`, { cause });
}

/** The asset's bytes, e.g. PTX to hand to cuModuleLoadData. */
export function readAsset(relativePath: string): Uint8Array {
  try {
    return Deno.readFileSync(assetUrl(relativePath));
  } catch (err) {
    if (err instanceof AssetError) throw err;
    throw missing(relativePath, err);
  }
}

type Env = (name: string) => string | undefined;

const processEnv: Env = (name) => Deno.env.get(name);

/**
 * Where extracted assets go: systemd's StateDirectory (`$STATE_DIRECTORY`, the first entry
 * when it lists several), else `$XDG_CACHE_HOME/neuron`, else `$HOME/.cache/neuron`.
 */
export function assetCacheDir(env: Env = processEnv): string {
  const state = env("STATE_DIRECTORY")?.split(":")[0];
  if (state?.startsWith("/")) return state;
  const xdg = env("XDG_CACHE_HOME");
  if (xdg?.startsWith("/")) return `${xdg}/neuron`;
  const home = env("HOME");
  if (home?.startsWith("/")) return `${home}/.cache/neuron`;
  throw new AssetError(
    "asset_cache_unavailable",
    "no directory to extract the CPU kernel library to: set XDG_CACHE_HOME or HOME, or run " +
      "under systemd with StateDirectory=",
  );
}

/** Creates the cache directory (0700) or checks that an existing one only we can write. */
function prepareCacheDir(dir: string): void {
  try {
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new AssetError(
      "asset_cache_unavailable",
      `cannot create the asset cache directory ${dir}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const info = Deno.lstatSync(dir);
  const uid = Deno.uid();
  if (!info.isDirectory) {
    throw new AssetError("asset_cache_unsafe", `asset cache ${dir} is not a directory`);
  }
  if (uid !== null && info.uid !== uid) {
    throw new AssetError(
      "asset_cache_unsafe",
      `asset cache ${dir} belongs to uid ${info.uid}, not to this process (uid ${uid})`,
    );
  }
  if (info.mode !== null && (info.mode & 0o022) !== 0) {
    throw new AssetError(
      "asset_cache_unsafe",
      `asset cache ${dir} is writable by others (mode ${(info.mode & 0o777).toString(8)}): ` +
        "a library loaded from it could be replaced; chmod go-w it",
    );
  }
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** An extracted file is reused only when it is ours, read-only and byte-identical. */
function isIntact(path: string, size: number, hash: string): boolean {
  let info: Deno.FileInfo;
  try {
    info = Deno.lstatSync(path);
  } catch {
    return false;
  }
  const uid = Deno.uid();
  if (!info.isFile || info.size !== size) return false;
  if (uid !== null && info.uid !== uid) return false;
  if (info.mode !== null && (info.mode & 0o222) !== 0) return false;
  return sha256(Deno.readFileSync(path)) === hash;
}

function splitName(relativePath: string): { stem: string; ext: string } {
  const base = relativePath.slice(relativePath.lastIndexOf("/") + 1);
  const dot = base.indexOf(".");
  return dot > 0 ? { stem: base.slice(0, dot), ext: base.slice(dot) } : { stem: base, ext: "" };
}

/** Removes earlier versions of the same asset (other hashes) left by older builds. */
function pruneOthers(dir: string, stem: string, ext: string, keep: string): void {
  const pattern = new RegExp(`^${RegExp.escape(stem)}-[0-9a-f]{16}${RegExp.escape(ext)}$`);
  for (const entry of Deno.readDirSync(dir)) {
    if (entry.name === keep || !pattern.test(entry.name)) continue;
    try {
      Deno.removeSync(`${dir}/${entry.name}`);
    } catch {
      // Another process may be pruning too; what is left is harmless.
    }
  }
}

/**
 * Writes the asset to `<dir>/<stem>-<sha256 prefix><ext>` unless an intact copy is there:
 * written to a temporary file in the same directory, synced, made read-only, then renamed
 * into place, so concurrent starts never see a partial file.
 */
export function extractAsset(relativePath: string, dir: string): string {
  const bytes = readAsset(relativePath);
  const hash = sha256(bytes);
  const { stem, ext } = splitName(relativePath);
  const name = `${stem}-${hash.slice(0, 16)}${ext}`;
  const target = `${dir}/${name}`;
  prepareCacheDir(dir);
  if (isIntact(target, bytes.length, hash)) return target;
  const tmp = Deno.makeTempFileSync({ dir, prefix: `.${name}.`, suffix: ".tmp" });
  try {
    const file = Deno.openSync(tmp, { write: true, truncate: true });
    try {
      for (let off = 0; off < bytes.length;) off += file.writeSync(bytes.subarray(off));
      file.syncSync();
    } finally {
      file.close();
    }
    Deno.chmodSync(tmp, 0o500);
    Deno.renameSync(tmp, target);
  } catch (err) {
    try {
      Deno.removeSync(tmp);
    } catch {
      // Already renamed or never written.
    }
    throw new AssetError(
      "asset_cache_unavailable",
      `cannot extract ${relativePath} to ${target}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  pruneOthers(dir, stem, ext, name);
  return target;
}

export interface NativeAssetOptions {
  /** Whether assets are embedded; default `isCompiled()` (tests simulate either mode). */
  compiled?: boolean;
  /** Where to extract to; default `assetCacheDir()`. */
  cacheDir?: string;
}

/**
 * A real file native code can open (Deno.dlopen): the checkout's file under `deno run`,
 * an extracted copy, keyed by its hash, in a compiled executable.
 */
export function nativeAssetPath(relativePath: string, options: NativeAssetOptions = {}): string {
  if (!(options.compiled ?? isCompiled())) return assetPath(relativePath);
  return extractAsset(relativePath, options.cacheDir ?? assetCacheDir());
}
