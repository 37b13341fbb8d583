/**
 * `deno task compile`: one `dist/neuron` executable carrying everything the node reads at
 * run time: the CPU kernel library, the CUDA kernels of every flavour built (PTX, cubins,
 * manifest), the engine's Worker module (deno compile does not follow `new Worker`), and
 * `build_info.json` with the git sha and build time.
 *
 *   deno task compile [--flavours ada,blackwell,hopper] [--output FILE] [--no-check]
 *
 * `--flavours` names the CUDA flavours the executable must carry (missing ones fail the
 * build); without it, whatever `kernels/build/sm_*` holds is embedded. The CPU kernels are
 * always built first, the CUDA ones too when nvcc is present.
 *
 * deno compile appends the program to a base runtime, denort, which it downloads for the
 * target from Deno's release server (and caches in DENO_DIR). `DENORT_BIN=/path/to/denort`
 * makes it use that file instead, for machines without internet access.
 */

import { parseArgs } from "node:util";
import { buildCpuKernels } from "../kernels/build_cpu.ts";
import { buildCudaKernels, nvccAvailable } from "../kernels/build_cuda.ts";
import { NeuronError } from "../src/common/errors.ts";
import {
  type BuildInfo,
  gitRevision,
  makeBuildInfo,
  removeBuildInfo,
  writeBuildInfo,
} from "../src/common/build_info.ts";
import { type EmbeddedFiles, isEmbedded, parseEmbeddedFiles } from "./embedded_files.ts";
import { isPackageFlavour, PACKAGE_FLAVOURS, type PackageFlavour } from "./flavours.ts";

export type CompileErrorCode = "bad_usage" | "asset_missing" | "compile_failed";

export class CompileError extends NeuronError {
  declare readonly code: CompileErrorCode;

  constructor(code: CompileErrorCode, message: string) {
    super(code, message);
  }
}

export const TARGET = "x86_64-unknown-linux-gnu";
export const ENTRY = "main.ts";
/** Modules only reached through `new Worker(...)`, which deno compile cannot see. */
export const WORKER_MODULES = ["src/harness/native/model_worker.ts"];
export const CPU_LIBRARY = "kernels/build/libneuron_cpu.so";
export const BUILD_INFO = "src/common/build_info.json";
/** What the CUDA loader reads from a flavour's directory (its build stamp stays out). */
const KERNEL_FILE = /^(.+\.(ptx|cubin)|manifest\.json)$/;

export interface AssetPlan {
  /** Every `--include`, relative to the project root. */
  includes: string[];
  /** Kernel directories embedded, e.g. ["sm_120", "sm_89"]. */
  kernelDirs: string[];
  /** For build_info.json: what this executable can run. */
  features: string[];
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function builtKernelDirs(root: string): string[] {
  const dirs: string[] = [];
  try {
    for (const e of Deno.readDirSync(`${root}kernels/build`)) {
      if (e.isDirectory && /^sm_\d+$/.test(e.name)) dirs.push(e.name);
    }
  } catch {
    // No build directory: no CUDA kernels.
  }
  return dirs.sort();
}

/**
 * What to embed from the project at `root` (a directory path ending in "/"): the CUDA
 * kernels of `flavours` (all built ones when null), which must then be present.
 */
export function planAssets(root: string, flavours: PackageFlavour[] | null): AssetPlan {
  if (!exists(`${root}${CPU_LIBRARY}`)) {
    throw new CompileError(
      "asset_missing",
      `${CPU_LIBRARY} is missing: run \`deno task kernels:cpu\``,
    );
  }
  const kernelDirs = flavours === null
    ? builtKernelDirs(root)
    : [...new Set(flavours.map((f) => PACKAGE_FLAVOURS[f]))].sort();
  const kernelFiles: string[] = [];
  for (const dir of kernelDirs) {
    const rel = `kernels/build/${dir}`;
    const names = exists(`${root}${rel}`)
      ? [...Deno.readDirSync(`${root}${rel}`)].filter((e) => e.isFile && KERNEL_FILE.test(e.name))
        .map((e) => e.name).sort()
      : [];
    if (!names.includes("manifest.json") || !names.some((n) => n.endsWith(".ptx"))) {
      throw new CompileError(
        "asset_missing",
        `${rel} has no built kernels (manifest.json and PTX): run \`deno task kernels:cuda\` ` +
          "where nvcc is installed",
      );
    }
    kernelFiles.push(...names.map((n) => `${rel}/${n}`));
  }
  return {
    includes: [...WORKER_MODULES, CPU_LIBRARY, ...kernelFiles, BUILD_INFO],
    kernelDirs,
    features: ["cpu-kernels", ...kernelDirs.map((d) => `cuda-${d}`)],
  };
}

export interface CompileOptions {
  output: string;
  /** Type-check first (the default; tests that only look at embedding skip it). */
  check?: boolean;
  /** The denort base to use instead of `$DENORT_BIN` (or a download). */
  denortBin?: string;
}

/** The `deno compile` arguments for `plan`. */
export function compileArgs(plan: AssetPlan, options: CompileOptions): string[] {
  return [
    "compile",
    "-A",
    "--unstable-no-legacy-abort",
    "--target",
    TARGET,
    // The lockfile also pins test-only npm packages (about 100 MB): keep them out.
    "--exclude-unused-npm",
    ...(options.check === false ? ["--no-check"] : []),
    ...plan.includes.flatMap((p) => ["--include", p]),
    "--output",
    options.output,
    ENTRY,
  ];
}

export interface CompileResult {
  success: boolean;
  /** What deno compile printed (stdout and stderr). */
  output: string;
  /** The embedded-file tree it printed, when it got that far. */
  embedded: EmbeddedFiles | null;
  /** Planned includes absent from that tree. */
  notEmbedded: string[];
}

/**
 * Writes `info` as build_info.json, runs deno compile in `root` and reads back what it
 * embedded; the stamp is removed again afterwards so the checkout keeps asking git.
 */
export async function runCompile(
  root: string,
  plan: AssetPlan,
  info: BuildInfo,
  options: CompileOptions,
): Promise<CompileResult> {
  writeBuildInfo(root, info);
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(Deno.execPath(), {
      args: compileArgs(plan, options),
      cwd: root,
      env: { NO_COLOR: "1", ...(options.denortBin ? { DENORT_BIN: options.denortBin } : {}) },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } finally {
    removeBuildInfo(root);
  }
  const dec = new TextDecoder();
  const output = dec.decode(out.stdout) + dec.decode(out.stderr);
  const embedded = parseEmbeddedFiles(output);
  const notEmbedded = embedded === null
    ? [...plan.includes]
    : plan.includes.filter((p) => !isEmbedded(embedded, p));
  return { success: out.success, output, embedded, notEmbedded };
}

function parseFlavours(value: string | undefined): PackageFlavour[] | null {
  if (value === undefined) return null;
  const names = value.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !isPackageFlavour(n));
  if (names.length === 0 || unknown.length > 0) {
    throw new CompileError(
      "bad_usage",
      `--flavours: expected a comma-separated list of ${
        Object.keys(PACKAGE_FLAVOURS).join(", ")
      }, got ${JSON.stringify(value)}`,
    );
  }
  return names as PackageFlavour[];
}

const ROOT = new URL("../", import.meta.url).pathname;

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      flavours: { type: "string" },
      output: { type: "string", default: "dist/neuron" },
      "no-check": { type: "boolean", default: false },
    },
  });
  const flavours = parseFlavours(values.flavours);
  const output = values.output.startsWith("/") ? values.output : `${ROOT}${values.output}`;

  await buildCpuKernels();
  if (await nvccAvailable()) {
    await buildCudaKernels({ flavours: flavours?.map((f) => PACKAGE_FLAVOURS[f]) });
  }
  const plan = planAssets(ROOT, flavours);
  const info = makeBuildInfo(gitRevision(ROOT), plan.features);
  Deno.mkdirSync(output.slice(0, output.lastIndexOf("/")), { recursive: true });
  const result = await runCompile(ROOT, plan, info, { output, check: !values["no-check"] });
  console.log(result.output.trimEnd());
  if (result.notEmbedded.length > 0) {
    throw new CompileError(
      "compile_failed",
      `deno compile did not embed: ${result.notEmbedded.join(", ")}`,
    );
  }
  if (!result.success) {
    const hint = Deno.env.get("DENORT_BIN")
      ? `every asset was embedded, but DENORT_BIN=${Deno.env.get("DENORT_BIN")} is not a ` +
        `usable denort base for ${TARGET}`
      : "deno compile could not produce the executable; without internet access, point " +
        `DENORT_BIN at the denort binary of deno ${Deno.version.deno} for ${TARGET}`;
    throw new CompileError("compile_failed", hint);
  }
  const version = await new Deno.Command(output, { args: ["--version"], stdout: "piped" })
    .output();
  console.log(`${output}: ${new TextDecoder().decode(version.stdout).trim()}`);
  console.log(`embedded: ${plan.features.join(", ")}; git ${info.git_sha.slice(0, 12)}`);
  return version.success ? 0 : 1;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (err) {
    if (!(err instanceof NeuronError) && !(err instanceof TypeError)) throw err;
    console.error(`error: ${err.message}`);
    Deno.exit(err instanceof CompileError && err.code === "bad_usage" ? 2 : 1);
  }
}
