/**
 * Weight types the CPU kernels repack at load for products of a few rows (kernels/cpu/
 * repack.c): sixteen rows interleaved, so a batch of decodes or a speculative verification
 * reads each weight once and multiplies it with every row at the prefill kernels' rate,
 * without the panel packing those pay per call. Their ids are in kernel_types.ts.
 */

import type { ExpertSource, WeightSource } from "../backend.ts";
import { log } from "../../common/log.ts";
import { CpuExperts } from "./cpu_experts.ts";
import { CpuWeight } from "./handles.ts";
import { REPACK_ROWS } from "./kernel_types.ts";
import type { CpuKernels } from "./kernels.ts";
import type { Pool } from "./pool.ts";
import type { WeightArena } from "./weight_arena.ts";

/**
 * `source` repacked into `arena` (on huge pages) when the kernels repack its type on this
 * CPU and its rows come in whole groups; null when the weight keeps its GGUF layout.
 */
export function repackWeight(
  kernels: CpuKernels,
  pool: Pool,
  arena: WeightArena,
  source: WeightSource,
): CpuWeight | null {
  const { name, type, rows, cols } = source;
  const to = repackedTypeOf(kernels, source);
  if (to === null) return null;
  const bytes = rows * kernels.rowBytes(to, cols);
  if (!roomFor(arena, bytes, name)) return null;
  const pointer = arena.reserve(bytes);
  pool.repack(type.id, source.pointer, rows, cols, pointer);
  return new CpuWeight(name, type, rows, cols, pointer, to);
}

/**
 * The experts of `source` repacked one after another into `arena`, as repackWeight does
 * one matrix (a rank's rows of each included); null when they keep their GGUF layout.
 */
export function repackExperts(
  kernels: CpuKernels,
  pool: Pool,
  arena: WeightArena,
  source: ExpertSource,
): CpuExperts | null {
  const { name, type, experts, rows, cols } = source;
  const to = repackedTypeOf(kernels, source);
  if (to === null) return null;
  const stride = rows * kernels.rowBytes(to, cols);
  if (!roomFor(arena, experts * stride, name)) return null;
  const pointer = arena.reserve(experts * stride);
  for (let e = 0; e < experts; e++) {
    const from = Deno.UnsafePointer.offset(source.pointer, e * source.expertStride)!;
    pool.repack(type.id, from, rows, cols, Deno.UnsafePointer.offset(pointer, e * stride)!);
  }
  return new CpuExperts(name, type, experts, rows, cols, pointer, stride, to);
}

/** Arenas that have said they stopped repacking (once each). */
const stopped = new WeakSet<WeightArena>();

/**
 * Whether `arena` can hold `bytes` more. A copy the host cannot hold is not made: the
 * tensor keeps its GGUF layout and is read in place (from the mapping), so a model whose
 * file fits in the page cache but whose repacked copy does not still loads.
 */
function roomFor(arena: WeightArena, bytes: number, tensor: string): boolean {
  if (arena.canReserve(bytes)) return true;
  if (!stopped.has(arena)) {
    stopped.add(arena);
    log.warn("repacking stopped: the host cannot hold a copy of the next weights", {
      tensor,
      bytes,
      effect: "the rest keep their GGUF layout; batched decode is slower",
    });
  }
  return false;
}

function repackedTypeOf(kernels: CpuKernels, source: WeightSource): number | null {
  return source.rows % REPACK_ROWS === 0 ? kernels.repackedType(source.type.id) : null;
}
