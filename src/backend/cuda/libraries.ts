/**
 * Finding and opening libcuda, libcublas and libnvidia-ml. A configured path with a slash
 * is used as is; a bare soname (the default, e.g. `libcublas.so.13`) is tried with the
 * dynamic loader's own search first (ldconfig cache, LD_LIBRARY_PATH), then in the usual
 * places: the system library folders, the driver folder of GPU containers
 * (/usr/local/nvidia), CUDA toolkits (/usr/local/cuda*) and the lib folders of Python's
 * nvidia-* wheels, where cuBLAS often lives on machines without a toolkit.
 */

import { errorMessage } from "../../common/errors.ts";
import { CudaUnavailableError } from "./errors.ts";

export type CudaLibraryKind = "libcuda" | "libcublas" | "libnvml";

const SYSTEM_DIRS = [
  "/usr/lib/x86_64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
  "/usr/lib64",
  "/usr/lib",
  "/usr/local/nvidia/lib64",
  "/usr/local/nvidia/lib",
  "/usr/lib/wsl/lib",
];

const TOOLKIT_DIRS = [
  "/usr/local/cuda/lib64",
  "/usr/local/cuda-*/lib64",
  "/usr/local/cuda/targets/*/lib",
  "/usr/local/cuda-*/targets/*/lib",
];

const PYTHON_SITE_DIRS = [
  "/usr/lib/python3*/dist-packages",
  "/usr/local/lib/python3*/dist-packages",
  "/usr/local/lib/python3*/site-packages",
  "/opt/*/.venv/lib/python3*/site-packages",
  "/opt/*/lib/python3*/site-packages",
  "/opt/conda/lib/python3*/site-packages",
];

/** The paths a glob-like pattern (`*` inside path segments only) names on this machine. */
export function expandPattern(pattern: string): string[] {
  let paths = [""];
  for (const segment of pattern.split("/").filter((s) => s !== "")) {
    const next: string[] = [];
    for (const base of paths) {
      if (!segment.includes("*")) {
        next.push(`${base}/${segment}`);
        continue;
      }
      const re = new RegExp(`^${segment.split("*").map(escapeRegExp).join(".*")}$`);
      try {
        for (const e of Deno.readDirSync(base || "/")) {
          if (re.test(e.name)) next.push(`${base}/${e.name}`);
        }
      } catch {
        // Unreadable or absent: nothing matches below it.
      }
    }
    paths = next.sort();
  }
  return paths.filter(exists);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function pythonSiteDirs(): string[] {
  const patterns = [...PYTHON_SITE_DIRS];
  const home = Deno.env.get("HOME");
  if (home) patterns.push(`${home}/.local/lib/python3*/site-packages`);
  const venv = Deno.env.get("VIRTUAL_ENV");
  if (venv) patterns.unshift(`${venv}/lib/python3*/site-packages`);
  return patterns.flatMap(expandPattern);
}

/** Folders searched for a bare soname of `kind`, best first. */
export function searchDirs(kind: CudaLibraryKind): string[] {
  const dirs = [...SYSTEM_DIRS];
  // libcuda belongs to the driver: a toolkit only has the stub, which cannot run anything.
  if (kind !== "libcuda") {
    dirs.push(...TOOLKIT_DIRS.flatMap(expandPattern));
    for (const site of pythonSiteDirs()) dirs.push(...expandPattern(`${site}/nvidia/*/lib`));
  }
  return [...new Set(dirs)].filter(exists);
}

/** Every place `configured` may be loaded from, in order. */
export function libraryCandidates(kind: CudaLibraryKind, configured: string): string[] {
  if (configured.includes("/")) return [configured];
  const found = searchDirs(kind)
    .map((dir) => `${dir}/${configured}`)
    .filter(exists);
  return [configured, ...new Set(found)];
}

export interface OpenedLibrary<S extends Deno.ForeignLibraryInterface> {
  lib: Deno.DynamicLibrary<S>;
  path: string;
}

/**
 * Opens the first candidate that loads with `symbols`; CudaUnavailableError with every
 * loader message otherwise.
 */
export function openLibrary<S extends Deno.ForeignLibraryInterface>(
  kind: CudaLibraryKind,
  configured: string,
  symbols: S,
): OpenedLibrary<S> {
  const failures: string[] = [];
  for (const path of libraryCandidates(kind, configured)) {
    try {
      return { lib: Deno.dlopen(path, symbols), path };
    } catch (err) {
      failures.push(loaderFailure(path, err));
    }
  }
  throw new CudaUnavailableError(`cannot load ${kind} (${configured}): ${failures.join("; ")}`);
}

/**
 * The loader's reason for `path`, said once: Deno repeats its "Could not open library"
 * prefix, and dlerror's message names the path already.
 */
function loaderFailure(path: string, err: unknown): string {
  const reason = errorMessage(err).replace(/^(Could not open library: )+/, "");
  return reason.startsWith(path) ? reason : `${path}: ${reason}`;
}
