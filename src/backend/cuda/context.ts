/**
 * Everything one CUDA backend holds: the driver, the device's primary context (retained
 * on the engine thread and current there), a non-blocking stream, device memory, the
 * loaded kernels, the step arena, the tape runner with its graph cache, cuBLAS, named
 * scratch buffers, and the per-step caches the ops share (interned layouts, quantized and
 * f16 copies of activations). Built in one place so that a failure halfway releases what
 * was built.
 */

import { errorMessage } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import { StepArena } from "./arena.ts";
import { availableFlavours, readKernelAsset, readManifest } from "./assets.ts";
import { Cublas } from "./cublas.ts";
import { EXPANSION_SHARE, WeightExpansions } from "./expansions.ts";
import { CudaDriver, type DeviceProps } from "./driver.ts";
import { invalidArgument } from "./errors.ts";
import { CU_STREAM_NON_BLOCKING } from "./driver_symbols.ts";
import { ccString, type FlavourChoice, selectFlavour } from "./flavour.ts";
import { GraphCache } from "./graph_cache.ts";
import { type Kernel, KernelSet } from "./kernels.ts";
import { DeviceMemory } from "./memory.ts";
import type { DeviceRows, Note } from "./notes.ts";
import { Runner } from "./runner.ts";

export interface CudaBackendOptions {
  /** libcuda path or soname (default `libcuda.so.1`). */
  libcuda?: string;
  /** libcublas path or soname (default `libcublas.so.13`); prefill works without it. */
  libcublas?: string;
  /** CUDA device ordinal (default 0). */
  device?: number;
  /** Capture repeated steps as CUDA graphs (default true). */
  graphs?: boolean;
  /** Use cuBLAS for prefill when it loads (default true). */
  cublas?: boolean;
  /** Fuse back-to-back ops into single kernels (default true; fusion.ts). */
  fusion?: boolean;
  /**
   * Bytes of f16 weight copies kept for cuBLAS prefill (expansions.ts; default an eighth of
   * the device's memory, 0 expands every step).
   */
  expansionBytes?: number;
}

const ARENA_BYTES = 1 << 20;

/** moe_group's grouping of the (token, slot) rows of the ids `src` by expert (ops_moe.ts). */
export interface MoeGrouping {
  readonly src: DeviceRows;
  readonly experts: number;
  readonly order: number;
  readonly gexp: number;
  readonly gstart: number;
  readonly groups: number;
}

/** A step layout in the arena (device addresses); rowSeq and tables are 0 until a cache op
 * interns the sequences too. */
export interface DeviceLayout {
  rows: number;
  positions: number;
  rowSeq: number;
  tables: number;
  stride: number;
}

export class CudaContext {
  readonly driver: CudaDriver;
  readonly device: DeviceProps;
  readonly flavour: FlavourChoice;
  readonly image: "cubin" | "ptx";
  readonly stream: Deno.PointerValue;
  readonly memory: DeviceMemory;
  readonly kernels: KernelSet;
  readonly arena: StepArena;
  readonly graphs: GraphCache | null;
  readonly runner: Runner;
  readonly cublas: Cublas | null;
  readonly fusion: boolean;
  /** What the last records were, for fusion (fusion.ts). */
  readonly notes: Note[] = [];
  /** Per-step caches, dropped at every flush. */
  readonly layouts = new Map<object, DeviceLayout>();
  quantized: { src: DeviceRows; xq: number; xd: number; kp: number } | null = null;
  halves: { src: DeviceRows; ptr: number; scale: number } | null = null;
  grouping: MoeGrouping | null = null;
  readonly expansions: WeightExpansions;
  readonly #scratch = new Map<string, { ptr: number; bytes: number }>();
  readonly #index: number;
  #closed = false;

  private constructor(parts: {
    driver: CudaDriver;
    device: DeviceProps;
    flavour: FlavourChoice;
    image: "cubin" | "ptx";
    stream: Deno.PointerValue;
    memory: DeviceMemory;
    kernels: KernelSet;
    arena: StepArena;
    graphs: GraphCache | null;
    cublas: Cublas | null;
    fusion: boolean;
    expansionBytes: number;
  }) {
    this.driver = parts.driver;
    this.device = parts.device;
    this.#index = parts.device.index;
    this.flavour = parts.flavour;
    this.image = parts.image;
    this.stream = parts.stream;
    this.memory = parts.memory;
    this.kernels = parts.kernels;
    this.arena = parts.arena;
    this.graphs = parts.graphs;
    this.cublas = parts.cublas;
    this.fusion = parts.fusion;
    this.expansions = new WeightExpansions(this.memory, parts.expansionBytes);
    this.runner = new Runner(this.driver, this.kernels, this.arena, this.stream, this.graphs);
  }

  static create(options: CudaBackendOptions): CudaContext {
    const budget = options.expansionBytes;
    if (budget !== undefined && !(Number.isSafeInteger(budget) && budget >= 0)) {
      throw invalidArgument("createCudaBackend", `expansionBytes ${budget} is not a byte count`);
    }
    const driver = CudaDriver.open(options.libcuda ?? "libcuda.so.1");
    const undo: Array<() => void> = [() => driver.close()];
    try {
      const device = driver.device(options.device ?? 0);
      const flavour = selectFlavour(device.cc, availableFlavours());
      driver.retainPrimaryContext(device.index);
      undo.push(() => driver.releasePrimaryContext(device.index));
      const stream = driver.streamCreate(CU_STREAM_NON_BLOCKING);
      undo.push(() => driver.check("cuStreamDestroy_v2", driver.sym.cuStreamDestroy_v2(stream)));
      const memory = new DeviceMemory(driver, () => {
        driver.check("cuStreamSynchronize", driver.sym.cuStreamSynchronize(stream));
      });
      undo.push(() => memory.releaseAll());
      const { kernels, image } = loadKernels(driver, flavour);
      undo.push(() => kernels.unload());
      const arena = new StepArena(driver, memory, ARENA_BYTES);
      undo.push(() => arena.close());
      const graphs = options.graphs === false ? null : new GraphCache(driver);
      const cublas = options.cublas === false ? null : openCublas(options.libcublas, stream);
      const ctx = new CudaContext({
        driver,
        device,
        flavour,
        image,
        stream,
        memory,
        kernels,
        arena,
        graphs,
        cublas,
        fusion: options.fusion !== false,
        expansionBytes: options.expansionBytes ??
          Math.floor(device.totalBytes * EXPANSION_SHARE),
      });
      log.info("CUDA backend ready", {
        device: device.name,
        compute_capability: ccString(device.cc),
        flavour: flavour.flavour.name,
        image,
        cublas: cublas?.path ?? null,
        graphs: graphs !== null,
        fusion: options.fusion !== false,
        driver: driver.path,
      });
      return ctx;
    } catch (err) {
      for (const step of undo.reverse()) {
        try {
          step();
        } catch {
          // Unwinding a failed start: the first error is the one to report.
        }
      }
      throw err;
    }
  }

  k(name: string): Kernel {
    return this.kernels.get(name);
  }

  /** Sends the recorded step to the GPU; per-step caches start over. */
  flush(): void {
    try {
      this.runner.flush();
    } finally {
      this.layouts.clear();
      this.notes.length = 0;
      this.quantized = null;
      this.halves = null;
      this.grouping = null;
    }
  }

  /** Flushes and waits for the GPU. */
  sync(): void {
    this.flush();
    this.driver.check("cuStreamSynchronize", this.driver.sym.cuStreamSynchronize(this.stream));
  }

  /**
   * A scratch buffer `name` of at least `bytes`. Growing it flushes first (recorded
   * launches still name the old buffer) and drops every graph (they name it too).
   */
  scratch(name: string, bytes: number): number {
    const cur = this.#scratch.get(name);
    if (cur !== undefined && cur.bytes >= bytes) return cur.ptr;
    this.flush();
    this.graphs?.clear();
    if (cur !== undefined) this.memory.free(cur.ptr);
    const size = Math.max(bytes, cur ? cur.bytes * 2 : 0);
    const ptr = this.memory.alloc(size, "scratch");
    this.#scratch.set(name, { ptr, bytes: size });
    return ptr;
  }

  /** Room for `bytes` of step data in the arena, flushing and growing it if needed. */
  reserveArena(bytes: number): void {
    if (this.arena.fits(bytes)) return;
    this.sync();
    this.graphs?.clear();
    this.arena.grow(bytes);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.runner.tape.clear();
    const steps: Array<() => void> = [
      () => this.graphs?.clear(),
      () =>
        this.driver.check("cuStreamSynchronize", this.driver.sym.cuStreamSynchronize(this.stream)),
      () => this.cublas?.close(),
      () => this.kernels.unload(),
      () => this.arena.close(),
      () => this.memory.releaseAll(),
      () =>
        this.driver.check("cuStreamDestroy_v2", this.driver.sym.cuStreamDestroy_v2(this.stream)),
      () => this.driver.releasePrimaryContext(this.#index),
      () => this.driver.close(),
    ];
    for (const step of steps) {
      try {
        step();
      } catch (err) {
        log.warn("CUDA backend close: a release step failed", { error: errorMessage(err) });
      }
    }
  }
}

function loadKernels(
  driver: CudaDriver,
  choice: FlavourChoice,
): { kernels: KernelSet; image: "cubin" | "ptx" } {
  const name = choice.flavour.name;
  const manifest = readManifest(name);
  if (choice.exact) {
    try {
      const kernels = KernelSet.load(driver, manifest, (m) => readKernelAsset(name, m.cubin));
      return { kernels, image: "cubin" };
    } catch (err) {
      log.warn("CUDA cubins did not load; using PTX", { flavour: name, error: errorMessage(err) });
    }
  }
  const kernels = KernelSet.load(driver, manifest, (m) => readKernelAsset(name, m.ptx));
  return { kernels, image: "ptx" };
}

function openCublas(libcublas: string | undefined, stream: Deno.PointerValue): Cublas | null {
  try {
    return Cublas.open(libcublas ?? "libcublas.so.13", stream);
  } catch (err) {
    log.warn("cuBLAS unavailable: prefill uses the mat-vec kernels", {
      error: errorMessage(err),
    });
    return null;
  }
}
