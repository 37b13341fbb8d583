/**
 * Where the CPU backend's weights live: read in place from the mmapped GGUF, copied into
 * the weight arena (mmap off, or a source that does not outlive the load), or repacked
 * there (repacked.ts); and the one look at the pages under weights read in place, which
 * decides the pool's page prefetching. Only loading comes here: the backend's other
 * methods record a step's ops.
 */

import type { ExpertSource, ExpertWeight, Weight, WeightSource } from "../backend.ts";
import { hugePageShare } from "../../common/huge_pages.ts";
import { log } from "../../common/log.ts";
import { CpuExperts, expertBytes, packedExperts } from "./cpu_experts.ts";
import { CpuKernelError } from "./errors.ts";
import { CpuWeight } from "./handles.ts";
import type { CpuKernels, Pool } from "./kernels.ts";
import { repackExperts, repackWeight } from "./repacked.ts";
import { WeightArena } from "./weight_arena.ts";

export class WeightLoader {
  readonly #kernels: CpuKernels;
  readonly #pool: Pool;
  readonly #weights: WeightArena;
  readonly #mmap: boolean;
  readonly #repack: boolean;
  /** Whether the pages under weights read in place have been looked at (common/huge_pages.ts). */
  #pagesKnown = false;

  /** `mmap` and `repack` as CpuBackendOptions has them (cpu_backend.ts). */
  constructor(kernels: CpuKernels, pool: Pool, mmap: boolean, repack: boolean) {
    this.#kernels = kernels;
    this.#pool = pool;
    this.#weights = new WeightArena(kernels);
    this.#mmap = mmap;
    this.#repack = repack;
    this.#pool.pagePrefetch = this.#mmap;
  }

  loadWeight(source: WeightSource): Weight {
    // Validates that the kernels can compute this type and shape before any step runs.
    const bytes = this.#kernels.rowBytes(source.type.id, source.cols) * source.rows;
    if (source.bytes.byteLength < bytes) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${source.name}: ${source.bytes.byteLength} bytes for ${source.rows}x${source.cols} ` +
          `of ${source.type.name} (${bytes} needed)`,
      );
    }
    const repacked = this.#repack && repackWeight(this.#kernels, this.#pool, this.#weights, source);
    if (repacked) return repacked;
    const inPlace = this.#mmap && !source.transient;
    if (inPlace && !this.#pagesKnown) {
      const share = hugePageShare(source.pointer, bytes);
      if (share !== null) {
        // Pages are prefetched ahead only on small pages; on huge ones that costs more.
        // The majority decides: reclaim splits a few of a cached file's folios.
        const huge = share >= 0.5;
        this.#pool.pagePrefetch = !huge;
        this.#pagesKnown = true;
        if (!huge) {
          log.info("weights read in place sit on 4 KiB pages: decode runs 10-20% slower", {
            why: "the page cache holds the model file in small folios",
            fix: "enable transparent huge pages (madvise), or set mmap = false",
          });
        }
      }
    }
    const pointer = inPlace ? source.pointer : this.#weights.place(source.bytes.subarray(0, bytes));
    return new CpuWeight(source.name, source.type, source.rows, source.cols, pointer);
  }

  loadExperts(source: ExpertSource): ExpertWeight {
    const bytes = expertBytes(source, this.#kernels.rowBytes(source.type.id, source.cols));
    const repacked = this.#repack &&
      repackExperts(this.#kernels, this.#pool, this.#weights, source);
    if (repacked) return repacked;
    const { name, type, experts, rows, cols } = source;
    if (this.#mmap && !source.transient) {
      return new CpuExperts(name, type, experts, rows, cols, source.pointer, source.expertStride);
    }
    const pointer = this.#weights.place(packedExperts(source, bytes));
    return new CpuExperts(name, type, experts, rows, cols, pointer, bytes);
  }

  /** Frees the arena: every weight not read in place. */
  free(): void {
    this.#weights.free();
  }
}
