/**
 * What tests/gpu/run.sh says before it runs anything on a GPU host: the driver's CUDA
 * version against what the carried PTX needs (a driver older than the PTX ISA refuses
 * every module, so each test would fail the same way), whether libcublas and libnccl load
 * (without them the cuBLAS prefill path and the NCCL tests are skipped, and said so), and
 * the GPU count (the two-rank NCCL test needs two).
 *
 *   deno run -A tests/gpu/preflight.ts [--json FILE]
 *
 * Prints `PREFLIGHT <key>: ok|warn|skip|fail <text>` lines; exits 0 unless no GPU at all
 * can be used. NEURON_TEST_LIBCUDA / NEURON_TEST_LIBCUBLAS as for the GPU tests.
 */

import { parseArgs } from "node:util";
import { CudaDriver } from "../../src/backend/cuda/driver.ts";
import { openLibrary } from "../../src/backend/cuda/libraries.ts";
import { availableFlavours, readManifest } from "../../src/backend/cuda/assets.ts";
import { DEFAULT_LIBNCCL, openNccl } from "../../src/tp/nccl.ts";
import { errorMessage } from "../../src/common/errors.ts";

/**
 * The oldest driver (cuDriverGetVersion: 1000 * major + 10 * minor) that loads a PTX ISA
 * version: each CUDA release's ISA (PTX ISA notes, "PTX ISA version" table).
 */
const ISA_DRIVER: Record<string, number> = {
  "8.0": 12000,
  "8.1": 12010,
  "8.2": 12020,
  "8.3": 12030,
  "8.4": 12040,
  "8.5": 12050,
  "8.6": 12070,
  "8.7": 12080,
  "8.8": 12090,
  "9.0": 13000,
  "9.1": 13010,
};

export type Verdict = "ok" | "warn" | "skip" | "fail";

export interface Preflight {
  driver: { verdict: Verdict; version: number | null; needs: number | null; text: string };
  cublas: { verdict: Verdict; text: string };
  nccl: { verdict: Verdict; text: string };
  gpus: number;
}

function cudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${(v % 1000) / 10}`;
}

/** The newest PTX ISA of the carried kernels, or null without any. */
function carriedIsa(): string | null {
  const isas = availableFlavours().map((f) => readManifest(f).ptxVersion).sort();
  return isas.length === 0 ? null : isas[isas.length - 1];
}

/** The driver's verdict on kernels of PTX ISA `isa` (null: none built or carried). */
export function driverVerdict(
  version: number,
  gpus: number,
  isa: string | null,
): Omit<Preflight["driver"], "version"> {
  const have = `driver CUDA ${cudaVersion(version)}`;
  if (isa === null) return { verdict: "fail", needs: null, text: "no kernels built or carried" };
  const needs = ISA_DRIVER[isa] ?? null;
  if (needs === null) {
    return { verdict: "warn", needs, text: `${have}; PTX ISA ${isa} is not in the table` };
  }
  if (version < needs) {
    return {
      verdict: "fail",
      needs,
      text: `${have} is older than PTX ISA ${isa} needs (CUDA ${cudaVersion(needs)}): ` +
        "the driver refuses every kernel module, so no GPU test can pass; update the driver",
    };
  }
  return {
    verdict: "ok",
    needs,
    text: `${have} >= CUDA ${cudaVersion(needs)} (PTX ISA ${isa}); ${gpus} GPU(s)`,
  };
}

export function preflight(): Preflight {
  const libcuda = Deno.env.get("NEURON_TEST_LIBCUDA") ?? "libcuda.so.1";
  const libcublas = Deno.env.get("NEURON_TEST_LIBCUBLAS") ?? "libcublas.so.13";
  let driver: Preflight["driver"];
  let gpus = 0;
  try {
    const d = CudaDriver.open(libcuda);
    try {
      const version = d.version();
      gpus = d.deviceCount();
      driver = { version, ...driverVerdict(version, gpus, carriedIsa()) };
      driver.text += ` (${d.path})`;
    } finally {
      d.close();
    }
  } catch (err) {
    driver = { verdict: "fail", version: null, needs: null, text: errorMessage(err) };
  }
  let cublas: Preflight["cublas"];
  try {
    const { lib, path } = openLibrary("libcublas", libcublas, {
      cublasCreate_v2: { parameters: ["buffer"], result: "i32" },
    });
    lib.close();
    cublas = { verdict: "ok", text: path };
  } catch (err) {
    cublas = {
      verdict: "skip",
      text: `${errorMessage(err)}: the cuBLAS prefill path is not tested and prefill runs ` +
        "on the mat-vec kernels",
    };
  }
  let nccl: Preflight["nccl"];
  try {
    openNccl(DEFAULT_LIBNCCL);
    nccl = { verdict: "ok", text: `${DEFAULT_LIBNCCL} loads` };
  } catch (err) {
    nccl = { verdict: "skip", text: `${errorMessage(err)}: the NCCL tests are skipped` };
  }
  return { driver, cublas, nccl, gpus };
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { json: { type: "string" } } });
  const p = preflight();
  console.log(`PREFLIGHT driver: ${p.driver.verdict} ${p.driver.text}`);
  console.log(`PREFLIGHT cublas: ${p.cublas.verdict} ${p.cublas.text}`);
  console.log(`PREFLIGHT nccl: ${p.nccl.verdict} ${p.nccl.text}`);
  if (values.json) Deno.writeTextFileSync(values.json, JSON.stringify(p, null, 2) + "\n");
  Deno.exit(p.driver.verdict === "fail" ? 1 : 0);
}
