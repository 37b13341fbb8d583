/**
 * Builds the CUDA kernels (`deno task kernels:cuda`): every `kernels/cuda/*.cu` becomes one
 * PTX module per flavour with `nvcc -ptx -arch=compute_<N>`, and each PTX is assembled with
 * `ptxas -arch=sm_<N>`, which validates it and gives a cubin the loader uses when the GPU
 * is exactly that architecture (no JIT at start). Output: `kernels/build/sm_<N>/` with the
 * .ptx and .cubin files and a manifest.json naming each module's kernels.
 *
 * The PTX ISA version nvcc writes must be one a CUDA 13.0 driver accepts (9.0); a newer
 * one fails the build. Incremental: a hash of sources and flags is kept per flavour.
 */

import { NeuronError } from "../src/common/errors.ts";
import {
  type Flavour,
  type FlavourManifest,
  FLAVOURS,
  type ModuleManifest,
} from "./cuda/manifest.ts";

export { FLAVOURS };

export type CudaBuildErrorCode = "nvcc_missing" | "cuda_build_failed";

export class CudaBuildError extends NeuronError {
  declare readonly code: CudaBuildErrorCode;

  constructor(code: CudaBuildErrorCode, message: string) {
    super(code, message);
  }
}

/** The newest PTX ISA a CUDA 13.0 driver loads. */
export const MAX_PTX_ISA = [9, 0] as const;

const SOURCE_DIR = new URL("./cuda/", import.meta.url).pathname;
export const CUDA_BUILD_DIR = new URL("./build/", import.meta.url).pathname;

const NVCC_FLAGS = ["-O3", "-std=c++17", "-lineinfo", "--extra-device-vectorization"];

function tool(name: "nvcc" | "ptxas"): string {
  const fromEnv = Deno.env.get(name === "nvcc" ? "NVCC" : "PTXAS");
  if (fromEnv) return fromEnv;
  for (const dir of ["/usr/local/cuda/bin", "/usr/local/cuda-13.0/bin"]) {
    try {
      Deno.statSync(`${dir}/${name}`);
      return `${dir}/${name}`;
    } catch {
      // Not there: fall through to PATH.
    }
  }
  return name;
}

/** Whether nvcc can be run here (the build's one prerequisite). */
export async function nvccAvailable(): Promise<boolean> {
  try {
    const out = await new Deno.Command(tool("nvcc"), { args: ["--version"], stdout: "null" })
      .output();
    return out.success;
  } catch {
    return false;
  }
}

async function run(cmd: string, args: string[]): Promise<string> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new CudaBuildError(
        "nvcc_missing",
        `${cmd} was not found: install the CUDA toolkit (13.0) or set NVCC/PTXAS`,
      );
    }
    throw err;
  }
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new CudaBuildError("cuda_build_failed", `${cmd} ${args.join(" ")} failed:\n${text}`);
  }
  return text;
}

function listSources(): { sources: string[]; headers: string[] } {
  const sources: string[] = [];
  const headers: string[] = [];
  for (const e of Deno.readDirSync(SOURCE_DIR)) {
    if (!e.isFile) continue;
    if (e.name.endsWith(".cu")) sources.push(e.name);
    if (e.name.endsWith(".cuh")) headers.push(e.name);
  }
  return { sources: sources.sort(), headers: headers.sort() };
}

async function sourceHash(flavour: Flavour, sources: string[], headers: string[]): Promise<string> {
  const parts = [flavour.name, JSON.stringify(NVCC_FLAGS)];
  for (const name of [...sources, ...headers]) {
    parts.push(name, Deno.readTextFileSync(`${SOURCE_DIR}${name}`));
  }
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts.join("\0")));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** `.version 9.0` of a PTX text. */
export function ptxVersion(ptx: string): string {
  const m = /^\s*\.version\s+(\d+)\.(\d+)/m.exec(ptx);
  if (!m) throw new CudaBuildError("cuda_build_failed", "PTX without a .version line");
  return `${m[1]}.${m[2]}`;
}

/** Every `.entry` of a PTX text with its parameter types, in order. */
export function ptxEntries(ptx: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  const re = /\.entry\s+(\w+)\s*\(([^)]*)\)/g;
  for (let m = re.exec(ptx); m !== null; m = re.exec(ptx)) {
    out[m[1]] = [...m[2].matchAll(/\.param\s+\.(\w+)/g)].map((p) => p[1]);
  }
  return out;
}

function checkIsa(file: string, version: string): void {
  const [major, minor] = version.split(".").map(Number);
  if (major > MAX_PTX_ISA[0] || (major === MAX_PTX_ISA[0] && minor > MAX_PTX_ISA[1])) {
    throw new CudaBuildError(
      "cuda_build_failed",
      `${file} is PTX ISA ${version}, newer than a CUDA 13.0 driver accepts ` +
        `(${MAX_PTX_ISA.join(".")})`,
    );
  }
}

function readStamp(dir: string): string | null {
  try {
    Deno.statSync(`${dir}/manifest.json`);
    return Deno.readTextFileSync(`${dir}/stamp`).trim();
  } catch {
    return null;
  }
}

interface FlavourBuild {
  work: string;
  finish: () => FlavourManifest;
}

/** Moves a finished build into place; a concurrent build of the same sources may win. */
function install(work: string, dir: string, hash: string): void {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // Absent: first build of this flavour.
    }
    try {
      Deno.renameSync(work, dir);
      return;
    } catch (err) {
      if (readStamp(dir) === hash) return;
      if (attempt === 2) throw err;
    }
  }
}

function buildFlavour(
  flavour: Flavour,
  sources: string[],
  hash: string,
  jobs: (() => Promise<void>)[],
): FlavourBuild {
  const dir = `${CUDA_BUILD_DIR}${flavour.name}`;
  Deno.mkdirSync(CUDA_BUILD_DIR, { recursive: true });
  const work = Deno.makeTempDirSync({ dir: CUDA_BUILD_DIR, prefix: `tmp-${flavour.name}-` });
  const modules: ModuleManifest[] = [];
  let version = "";
  for (const source of sources) {
    const name = source.slice(0, -3);
    jobs.push(async () => {
      await run(tool("nvcc"), [
        "-ptx",
        `-arch=compute_${flavour.cc}`,
        ...NVCC_FLAGS,
        "-o",
        `${work}/${name}.ptx`,
        `${SOURCE_DIR}${source}`,
      ]);
      const ptx = Deno.readTextFileSync(`${work}/${name}.ptx`);
      version = ptxVersion(ptx);
      checkIsa(`${flavour.name}/${name}.ptx`, version);
      await run(tool("ptxas"), [
        `-arch=${flavour.name}`,
        "-O3",
        `${work}/${name}.ptx`,
        "-o",
        `${work}/${name}.cubin`,
      ]);
      modules.push({ name, ptx: `${name}.ptx`, cubin: `${name}.cubin`, entries: ptxEntries(ptx) });
    });
  }
  const finish = (): FlavourManifest => {
    modules.sort((a, b) => a.name.localeCompare(b.name));
    const manifest: FlavourManifest = { flavour: flavour.name, ptxVersion: version, modules };
    Deno.writeTextFileSync(`${work}/manifest.json`, JSON.stringify(manifest) + "\n");
    Deno.writeTextFileSync(`${work}/stamp`, `${hash}\n`);
    install(work, dir, hash);
    return manifest;
  };
  return { work, finish };
}

const LOCK_STALE_MS = 300_000;

/**
 * Runs `fn` holding the lock file `path`, so that parallel test processes build one at a
 * time and the later ones find the work done. A lock older than five minutes is taken to
 * be left by a killed build.
 */
export async function withBuildLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      Deno.openSync(path, { createNew: true, write: true }).close();
      break;
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      try {
        const age = Date.now() - (Deno.statSync(path).mtime?.getTime() ?? Date.now());
        if (age > LOCK_STALE_MS) Deno.removeSync(path);
      } catch {
        // Released meanwhile.
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  try {
    return await fn();
  } finally {
    Deno.removeSync(path);
  }
}

export interface CudaBuildResult {
  /** Flavours rebuilt (the others were up to date). */
  rebuilt: string[];
  manifests: FlavourManifest[];
}

/** Builds every flavour (or those named) unless up to date. */
export function buildCudaKernels(
  options: { force?: boolean; flavours?: string[] } = {},
): Promise<CudaBuildResult> {
  Deno.mkdirSync(CUDA_BUILD_DIR, { recursive: true });
  return withBuildLock(`${CUDA_BUILD_DIR}.cuda.lock`, () => build(options));
}

async function build(options: { force?: boolean; flavours?: string[] }): Promise<CudaBuildResult> {
  const { sources, headers } = listSources();
  const wanted = FLAVOURS.filter((f) => !options.flavours || options.flavours.includes(f.name));
  const jobs: (() => Promise<void>)[] = [];
  const builds: FlavourBuild[] = [];
  const rebuilt: string[] = [];
  const manifests: FlavourManifest[] = [];
  try {
    for (const flavour of wanted) {
      const hash = await sourceHash(flavour, sources, headers);
      const dir = `${CUDA_BUILD_DIR}${flavour.name}`;
      if (!options.force && readStamp(dir) === hash) {
        manifests.push(JSON.parse(Deno.readTextFileSync(`${dir}/manifest.json`)));
        continue;
      }
      builds.push(buildFlavour(flavour, sources, hash, jobs));
      rebuilt.push(flavour.name);
    }
    const queue = [...jobs];
    const workers = Math.max(1, Math.min(queue.length, navigator.hardwareConcurrency || 1));
    await Promise.all(
      Array.from({ length: workers }, async () => {
        for (let job = queue.shift(); job; job = queue.shift()) await job();
      }),
    );
    for (const b of builds) manifests.push(b.finish());
  } finally {
    for (const b of builds) {
      try {
        Deno.removeSync(b.work, { recursive: true });
      } catch {
        // Already moved into place.
      }
    }
  }
  manifests.sort((a, b) => a.flavour.localeCompare(b.flavour));
  return { rebuilt, manifests };
}

if (import.meta.main) {
  const started = performance.now();
  try {
    const result = await buildCudaKernels({ force: Deno.args.includes("--force") });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    for (const m of result.manifests) {
      const kernels = m.modules.reduce((n, mod) => n + Object.keys(mod.entries).length, 0);
      const state = result.rebuilt.includes(m.flavour) ? "built" : "up to date";
      console.log(
        `${m.flavour}: ${state}, ${m.modules.length} modules, ${kernels} kernels, PTX ${m.ptxVersion}`,
      );
    }
    console.log(`kernels/build/sm_*: done in ${seconds} s`);
  } catch (err) {
    if (!(err instanceof CudaBuildError)) throw err;
    console.error(`error: ${err.message}`);
    Deno.exit(1);
  }
}
