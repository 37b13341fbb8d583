/**
 * Where the prebuilt llama.cpp comes from: the npm package `@node-llama-cpp/linux-x64`
 * (pinned in deno.json), which Deno fetches into its own npm cache on first use, verified
 * against deno.lock and shared by every checkout and test process (Deno locks its cache,
 * so parallel test files are safe). Only the CPU package is used: the full node-llama-cpp
 * would pull its CUDA builds too.
 *
 * The package holds libllama, libggml and one CPU backend per instruction-set level. The
 * level is picked here, explicitly: ggml's own pick would take the AMX build where the CPU
 * reports AMX, and that build dies with SIGILL in VMs that report AMX without enabling it.
 */

import { LlamaRefError } from "./errors.ts";

/** The npm package version; its llama.cpp is release v0.4.0, ggml commit 5b4ebc5. */
export const PACKAGE_VERSION = "3.21.1";
/** The llama.cpp release the package was built from (its `_nlcBuildMetadata.json`). */
export const LLAMA_CPP_RELEASE = "v0.4.0";
/** `ggml_commit()` of that build: the source whose llama.h `abi.ts` mirrors. */
export const GGML_COMMIT = "5b4ebc5";

/**
 * CPU backends from most to least capable, as ggml's CMakeLists names them. The AMX build
 * (`sapphirerapids`) is left out on purpose.
 */
const CPU_VARIANTS = [
  "zen4",
  "cooperlake",
  "icelake",
  "cascadelake",
  "cannonlake",
  "skylakex",
  "alderlake",
  "haswell",
  "piledriver",
  "ivybridge",
  "sandybridge",
  "sse42",
  "x64",
] as const;

export interface LlamaBinaries {
  dir: string;
  llama: string;
  ggml: string;
  ggmlBase: string;
  /** The CUDA backend, in a CUDA build (NEURON_LLAMA_CUDA_DIR). */
  cuda?: string;
}

interface BinsModule {
  getBinsDir(): { binsDir: string; packageVersion: string };
}

interface BuildMetadata {
  buildOptions?: { llamaCpp?: { release?: string } };
}

/** The release `dir`'s build metadata names; throws unless it is LLAMA_CPP_RELEASE. */
function checkRelease(dir: string): void {
  const meta: BuildMetadata = JSON.parse(Deno.readTextFileSync(`${dir}/_nlcBuildMetadata.json`));
  const release = meta.buildOptions?.llamaCpp?.release;
  if (release !== LLAMA_CPP_RELEASE) {
    throw new LlamaRefError(
      "llama_ref_version",
      `the package was built from llama.cpp ${release}, the binding mirrors ${LLAMA_CPP_RELEASE}`,
    );
  }
}

/**
 * The binaries on disk: with `$NEURON_LLAMA_CUDA_DIR`, the CUDA build of the same release
 * (npm:@node-llama-cpp/linux-x64-cuda's bins folder, which tests/gpu/prepare.sh carries to
 * a lent GPU: too large for Deno's npm cache in CI); else the CPU package, fetched into
 * Deno's npm cache first if need be.
 */
export async function llamaBinaries(): Promise<LlamaBinaries> {
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64") {
    throw new LlamaRefError(
      "llama_ref_unavailable",
      `the llama.cpp reference runs on linux x86_64 only, not ${Deno.build.os} ${Deno.build.arch}`,
    );
  }
  const cudaDir = Deno.env.get("NEURON_LLAMA_CUDA_DIR");
  if (cudaDir) {
    try {
      checkRelease(cudaDir);
    } catch (err) {
      if (err instanceof LlamaRefError) throw err;
      throw new LlamaRefError(
        "llama_ref_unavailable",
        `NEURON_LLAMA_CUDA_DIR=${cudaDir} holds no llama.cpp CUDA build: ${(err as Error).message}`,
      );
    }
    return {
      dir: cudaDir,
      llama: `${cudaDir}/libllama.cuda.v0.4.0.so`,
      ggml: `${cudaDir}/libggml.cuda.v0.4.0.so`,
      ggmlBase: `${cudaDir}/libggml-base.so`,
      cuda: `${cudaDir}/libggml-cuda.so`,
    };
  }
  let bins: ReturnType<BinsModule["getBinsDir"]>;
  try {
    const pkg: BinsModule = await import("@node-llama-cpp/linux-x64");
    bins = pkg.getBinsDir();
  } catch (err) {
    throw new LlamaRefError(
      "llama_ref_unavailable",
      `cannot fetch npm:@node-llama-cpp/linux-x64@${PACKAGE_VERSION} (about 10 MB from the npm ` +
        `registry, 29 MB in Deno's cache): ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (bins.packageVersion !== PACKAGE_VERSION) {
    throw new LlamaRefError(
      "llama_ref_version",
      `@node-llama-cpp/linux-x64 is ${bins.packageVersion}, the binding is for ${PACKAGE_VERSION}`,
    );
  }
  const dir = `${bins.binsDir}/linux-x64`;
  checkRelease(dir);
  return {
    dir,
    llama: `${dir}/libllama.v0.4.0.so`,
    ggml: `${dir}/libggml.v0.4.0.so`,
    ggmlBase: `${dir}/libggml-base.so`,
  };
}

/**
 * Each CPU variant's `ggml_backend_score()`: 0 where this CPU lacks what it needs, or the
 * build does not hold it (a carried CUDA build keeps a few).
 */
function variantScore(path: string): number {
  try {
    Deno.statSync(path);
  } catch {
    return 0;
  }
  const lib = Deno.dlopen(path, { ggml_backend_score: { parameters: [], result: "i32" } });
  try {
    return lib.symbols.ggml_backend_score();
  } finally {
    lib.close();
  }
}

/**
 * The CPU backend to load: `$NEURON_LLAMA_CPU_VARIANT` if set, else the one of highest
 * score, AMX never. The score is what ggml ranks its builds by (required features present,
 * more of them scoring higher).
 */
export function cpuVariant(bins: LlamaBinaries): { name: string; path: string } {
  const path = (name: string) => `${bins.dir}/libggml-cpu-${name}.so`;
  const forced = Deno.env.get("NEURON_LLAMA_CPU_VARIANT");
  if (forced) {
    if (!(CPU_VARIANTS as readonly string[]).includes(forced)) {
      throw new LlamaRefError(
        "llama_ref_unavailable",
        `NEURON_LLAMA_CPU_VARIANT=${forced} is not one of ${CPU_VARIANTS.join(", ")}`,
      );
    }
    return { name: forced, path: path(forced) };
  }
  let best: { name: string; path: string; score: number } | undefined;
  for (const name of CPU_VARIANTS) {
    const score = variantScore(path(name));
    if (score > 0 && (best === undefined || score > best.score)) {
      best = { name, path: path(name), score };
    }
  }
  if (best === undefined) {
    throw new LlamaRefError("llama_ref_unavailable", "no llama.cpp CPU backend runs on this CPU");
  }
  return { name: best.name, path: best.path };
}
