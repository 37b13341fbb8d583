/**
 * Builds the CUDA emulator, `kernels/build/emu/libcuda_emu.so`: the kernel sources of
 * kernels/cuda compiled as host C++ with NEURON_EMU, the fiber runtime, and a stand-in
 * libcuda + libcublas over them. The CUDA backend loads it as both libraries, so every
 * backend path (module loading, launches, graphs, cuBLAS calls) runs on machines without a
 * GPU. The kernels' launch limits come from the PTX and cubins of the CUDA build
 * (kernel_limits.ts), compiled in as a generated source. Rebuilt only when a source or a
 * limit changes; concurrent test processes each build in their own directory and rename
 * into place.
 */

import { buildCudaKernels, withBuildLock } from "../../../kernels/build_cuda.ts";
import { kernelLimits, limitsSource } from "./kernel_limits.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const KERNELS = `${ROOT}kernels/cuda/`;
const EMU = `${ROOT}tests/cuda/emu/`;
const OUT_DIR = `${ROOT}kernels/build/emu/`;
export const EMU_LIBRARY = `${OUT_DIR}libcuda_emu.so`;

const FLAGS = [
  "-O2",
  "-std=c++17",
  "-fPIC",
  "-fvisibility=hidden",
  "-DNEURON_EMU",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-Wno-unknown-pragmas",
  `-I${EMU}`,
];

/** Whether this CPU has FMA instructions (x86-64 from Haswell on). */
function cpuHasFma(): boolean {
  try {
    return /^flags\s*:.*\bfma\b/m.test(Deno.readTextFileSync("/proc/cpuinfo"));
  } catch {
    return false;
  }
}

/**
 * The kernels contract a * b + c into one FMA wherever they can, as nvcc does by default
 * (--fmad=true), so that tolerances measured here hold on a GPU; __fmul_rn and friends stay
 * unfused (emu.h). The emulator's own code (the fake cuBLAS among it) is not contracted.
 */
const KERNEL_FLAGS = ["-ffp-contract=fast", ...(cpuHasFma() ? ["-mfma"] : [])];
const RUNTIME_FLAGS = ["-ffp-contract=off"];

/** The variants NEURON_EMU_SANITIZE selects: UBSan with bounds checks on every array the
 * compiler knows the size of (shared and local arrays of the kernels included); any report
 * aborts the process. */
const VARIANTS: Record<string, string[]> = {
  "": [],
  ubsan: ["-fsanitize=undefined,bounds", "-fno-sanitize-recover=all", "-g", "-O1"],
};

/** The variant NEURON_EMU_SANITIZE names ("" for none). */
export function emuVariant(): string {
  const v = Deno.env.get("NEURON_EMU_SANITIZE") ?? "";
  if (!(v in VARIANTS)) {
    throw new Error(`NEURON_EMU_SANITIZE=${v}: the emulator variants are ubsan (or unset)`);
  }
  return v;
}

/** Where the emulator of `variant` is built. */
export function emuLibrary(variant = emuVariant()): string {
  return variant === "" ? EMU_LIBRARY : `${OUT_DIR}libcuda_emu-${variant}.so`;
}

function sources(dir: string, exts: string[]): string[] {
  return [...Deno.readDirSync(dir)]
    .filter((e) => e.isFile && exts.some((x) => e.name.endsWith(x)))
    .map((e) => `${dir}${e.name}`)
    .sort();
}

async function hash(files: string[], generated: string, variant: string): Promise<string> {
  const parts = [
    JSON.stringify([FLAGS, KERNEL_FLAGS, RUNTIME_FLAGS, VARIANTS[variant]]),
    generated,
    ...files.flatMap((f) => [f, Deno.readTextFileSync(f)]),
  ];
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts.join("\0")));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

function stamp(lib: string): string | null {
  try {
    Deno.statSync(lib);
    return Deno.readTextFileSync(`${lib}.stamp`).trim();
  } catch {
    return null;
  }
}

/** Whether a C++ compiler is here (the emulator's one prerequisite). */
export async function cxxAvailable(): Promise<boolean> {
  try {
    return (await new Deno.Command("g++", { args: ["--version"], stdout: "null" }).output())
      .success;
  } catch {
    return false;
  }
}

/** The emulator library's path (of the NEURON_EMU_SANITIZE variant), built first when
 * stale (the CUDA kernels too). */
export async function buildEmulator(): Promise<string> {
  const variant = emuVariant();
  await buildCudaKernels();
  Deno.mkdirSync(OUT_DIR, { recursive: true });
  return withBuildLock(`${OUT_DIR}.emu${variant}.lock`, () => build(variant));
}

async function gxx(args: string[], cwd: string): Promise<void> {
  const out = await new Deno.Command("g++", { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(`building the CUDA emulator failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
}

async function build(variant: string): Promise<string> {
  const lib = emuLibrary(variant);
  const cu = sources(KERNELS, [".cu"]);
  const runtime = sources(EMU, [".cc"]);
  const all = [...cu, ...sources(KERNELS, [".cuh"]), ...runtime, ...sources(EMU, [".h"])];
  const limits = limitsSource(kernelLimits());
  const h = await hash(all, limits, variant);
  if (stamp(lib) === h) return lib;
  const work = Deno.makeTempDirSync({ dir: OUT_DIR, prefix: "tmp-" });
  try {
    Deno.writeTextFileSync(`${work}/limits.cc`, limits);
    const extra = VARIANTS[variant];
    // Two compiles (kernels, runtime) at once: their floating-point flags differ.
    await Promise.all([
      gxx([...FLAGS, ...extra, ...KERNEL_FLAGS, "-c", "-x", "c++", ...cu], work),
      gxx([...FLAGS, ...extra, ...RUNTIME_FLAGS, "-c", ...runtime, `${work}/limits.cc`], work),
    ]);
    const objects = [...Deno.readDirSync(work)].filter((e) => e.name.endsWith(".o"))
      .map((e) => `${work}/${e.name}`).sort();
    await gxx(["-shared", ...extra, ...objects, "-o", `${work}/lib.so`], work);
    Deno.writeTextFileSync(`${work}/stamp`, `${h}\n`);
    Deno.renameSync(`${work}/lib.so`, lib);
    Deno.renameSync(`${work}/stamp`, `${lib}.stamp`);
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
  return lib;
}

const CONTROL = {
  emu_configure: { parameters: ["buffer", "f64"], result: "i32" },
  emu_stat: { parameters: ["buffer"], result: "f64" },
  emu_drain: { parameters: [], result: "i32" },
} as const;

/** The emulator's knobs and counters (the same library instance the backend loaded). */
export class EmuControl {
  readonly #lib: Deno.DynamicLibrary<typeof CONTROL>;

  constructor(path: string) {
    this.#lib = Deno.dlopen(path, CONTROL);
  }

  /** init_result, device_count, cc_major, cc_minor, total_mb, sm_count, regs_per_block,
   * reset_stats. */
  set(key: string, value: number): void {
    if (this.#lib.symbols.emu_configure(new TextEncoder().encode(`${key}\0`), value) !== 0) {
      throw new Error(`unknown emulator setting ${key}`);
    }
  }

  /** launches, graph_launches, captures, graph_nodes, allocations, live_bytes, gemms,
   * sticky_error, order (NEURON_EMU_ORDER: 0 forward, 1 reverse, 2 shuffle, -1 invalid). */
  stat(key: string): number {
    return this.#lib.symbols.emu_stat(new TextEncoder().encode(`${key}\0`));
  }

  /** Runs all queued device work now (a stand-in for stream-ordered host work); its CUresult. */
  drain(): number {
    return this.#lib.symbols.emu_drain();
  }

  close(): void {
    this.#lib.close();
  }
}
