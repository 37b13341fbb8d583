/**
 * Builds the CPU kernel library `kernels/build/libneuron_cpu.so` with gcc (`deno task
 * kernels:cpu`). Nothing depends on the build host's -march: isa_*.c compile once per
 * dispatch level with that level's target flags, kern_<level>[_*].c with its level's flags
 * (avx512vbmi is a kernel-only level: AVX-512 plus a few kernels), the rest for baseline
 * x86-64, and the library picks a level at run time with cpuid.
 *
 * Incremental: a hash of every source, header and flag is kept beside the library, and a
 * build whose hash matches does nothing. Concurrent builds (parallel test processes) each
 * work in their own directory and rename the result into place.
 */

import { NeuronError } from "../src/common/errors.ts";

export type KernelBuildErrorCode = "gcc_missing" | "kernel_build_failed";

export class KernelBuildError extends NeuronError {
  declare readonly code: KernelBuildErrorCode;

  constructor(code: KernelBuildErrorCode, message: string) {
    super(code, message);
  }
}

export interface BuildResult {
  /** Absolute path of the library. */
  path: string;
  /** False when the library was already up to date. */
  rebuilt: boolean;
}

const SOURCE_DIR = new URL("./cpu/", import.meta.url).pathname;
const BUILD_DIR = new URL("./build/", import.meta.url).pathname;
export const CPU_LIBRARY_PATH = `${BUILD_DIR}libneuron_cpu.so`;
const STAMP_PATH = `${CPU_LIBRARY_PATH}.stamp`;

const COMMON_FLAGS = [
  "-O3",
  "-fPIC",
  "-std=gnu11",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-fvisibility=hidden",
  "-fno-math-errno",
  "-pthread",
];

const LEVEL_FLAGS: Record<string, string[]> = {
  scalar: [],
  avx2: ["-mavx", "-mavx2", "-mfma", "-mf16c"],
  avx512: [
    "-mavx",
    "-mavx2",
    "-mfma",
    "-mf16c",
    "-mavx512f",
    "-mavx512bw",
    "-mavx512vl",
    "-mavx512dq",
    "-mavx512vnni",
    "-mprefer-vector-width=512",
  ],
};

/* Levels that differ from another only in a few kernels: their kern_<level>*.c sources
 * build with these flags, and no isa_*.c copy is made for them. */
const KERNEL_LEVEL_FLAGS: Record<string, string[]> = {
  ...LEVEL_FLAGS,
  avx512vbmi: [...LEVEL_FLAGS.avx512, "-mavx512vbmi"],
};

interface CompileJob {
  source: string;
  object: string;
  flags: string[];
}

function listSources(): { sources: string[]; headers: string[] } {
  const sources: string[] = [];
  const headers: string[] = [];
  for (const entry of Deno.readDirSync(SOURCE_DIR)) {
    if (!entry.isFile) continue;
    if (entry.name.endsWith(".c")) sources.push(entry.name);
    if (entry.name.endsWith(".h")) headers.push(entry.name);
  }
  return { sources: sources.sort(), headers: headers.sort() };
}

function jobsFor(sources: string[], objDir: string): CompileJob[] {
  const jobs: CompileJob[] = [];
  for (const source of sources) {
    const base = source.slice(0, -2);
    const kern = /^kern_([a-z0-9]+)(_\w+)?$/.exec(base);
    if (source.startsWith("isa_")) {
      for (const [level, flags] of Object.entries(LEVEL_FLAGS)) {
        jobs.push({
          source,
          object: `${objDir}/${base}_${level}.o`,
          flags: [...flags, `-DNK_ISA_NAME=${level}`],
        });
      }
    } else if (kern) {
      const flags = KERNEL_LEVEL_FLAGS[kern[1]];
      if (!flags) {
        throw new KernelBuildError(
          "kernel_build_failed",
          `${source}: unknown dispatch level ${kern[1]}`,
        );
      }
      jobs.push({
        source,
        object: `${objDir}/${base}.o`,
        flags: [...flags, `-DNK_ISA_NAME=${kern[1]}`],
      });
    } else {
      jobs.push({ source, object: `${objDir}/${base}.o`, flags: [] });
    }
  }
  return jobs;
}

async function sourceHash(cc: string, sources: string[], headers: string[]): Promise<string> {
  const parts: string[] = [cc, JSON.stringify(COMMON_FLAGS), JSON.stringify(KERNEL_LEVEL_FLAGS)];
  for (const name of [...sources, ...headers]) {
    parts.push(name, Deno.readTextFileSync(`${SOURCE_DIR}${name}`));
  }
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts.join("\0")));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function run(cc: string, args: string[]): Promise<void> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cc, { args, stdout: "piped", stderr: "piped" }).output();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new KernelBuildError(
        "gcc_missing",
        `${cc} was not found: install gcc (e.g. apt-get install gcc) to build the ` +
          "CPU kernels, or point CC at a C compiler",
      );
    }
    throw err;
  }
  if (!out.success) {
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    throw new KernelBuildError(
      "kernel_build_failed",
      `${cc} ${args.join(" ")} failed:\n${text}`,
    );
  }
}

function readStamp(): string | null {
  try {
    Deno.statSync(CPU_LIBRARY_PATH);
    return Deno.readTextFileSync(STAMP_PATH).trim();
  } catch {
    return null;
  }
}

export interface BuildOptions {
  /** Rebuild even when the stamp matches. */
  force?: boolean;
  /** The C compiler; default `$CC`, else gcc. */
  cc?: string;
}

/** Builds the library unless it is up to date. */
export async function buildCpuKernels(options: BuildOptions = {}): Promise<BuildResult> {
  const cc = options.cc ?? Deno.env.get("CC") ?? "gcc";
  const { sources, headers } = listSources();
  const hash = await sourceHash(cc, sources, headers);
  if (!options.force && readStamp() === hash) return { path: CPU_LIBRARY_PATH, rebuilt: false };
  Deno.mkdirSync(BUILD_DIR, { recursive: true });
  const work = Deno.makeTempDirSync({ dir: BUILD_DIR, prefix: "tmp-" });
  try {
    const jobs = jobsFor(sources, work);
    const queue = [...jobs];
    const workers = Math.max(1, navigator.hardwareConcurrency || 1);
    await Promise.all(
      Array.from({ length: workers }, async () => {
        for (let job = queue.shift(); job; job = queue.shift()) {
          await run(cc, [
            ...COMMON_FLAGS,
            ...job.flags,
            "-c",
            `${SOURCE_DIR}${job.source}`,
            "-o",
            job.object,
          ]);
        }
      }),
    );
    const lib = `${work}/libneuron_cpu.so`;
    await run(cc, ["-shared", "-pthread", "-o", lib, ...jobs.map((j) => j.object), "-lm"]);
    Deno.renameSync(lib, CPU_LIBRARY_PATH);
    Deno.writeTextFileSync(`${work}/stamp`, `${hash}\n`);
    Deno.renameSync(`${work}/stamp`, STAMP_PATH);
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
  return { path: CPU_LIBRARY_PATH, rebuilt: true };
}

if (import.meta.main) {
  const started = performance.now();
  try {
    const result = await buildCpuKernels({ force: Deno.args.includes("--force") });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      result.rebuilt ? `built ${result.path} in ${seconds} s` : `${result.path} is up to date`,
    );
  } catch (err) {
    if (!(err instanceof KernelBuildError)) throw err;
    console.error(`error: ${err.message}`);
    Deno.exit(1);
  }
}
