/**
 * What happens outside steps: weights copied to the device (1-row tensors, the norm
 * weights, biases and RoPE factors, expanded to f32 on the host first), KV caches
 * allocated (checked against free memory first) and zeroed, rows copied between cache
 * blocks (a prefix shared mid-block), the fit check with its numbers, and the
 * copy-bandwidth probe.
 */

import { dequantizeRow } from "../../gguf/dequant/mod.ts";
import { GgmlType, ggmlTypeInfo, rowBytes } from "../../gguf/types.ts";
import {
  kvCacheBytes,
  type KvCacheSpec,
  kvCopyProblem,
  kvDTypeProblem,
  kvLayerBytes,
  kvRowBytes,
  type WeightSource,
} from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { CudaError, invalidArgument, mib } from "./errors.ts";
import { supportedType } from "./matmul_plan.ts";
import { CudaKvCache, CudaWeight } from "./resources.ts";

/** Device memory left free for scratch buffers, cuBLAS workspaces and the context. */
export const HEADROOM_BYTES = 512 * 1024 * 1024;

/** Throws `cuda_out_of_memory` unless `bytes` more fit on the device, with headroom. */
export function ensureFits(ctx: CudaContext, bytes: number, what: string): void {
  const { free, total } = ctx.driver.memInfo();
  if (bytes + HEADROOM_BYTES > free) {
    throw new CudaError(
      "cuda_out_of_memory",
      `${what} needs ${mib(bytes)} of GPU memory (plus ${mib(HEADROOM_BYTES)} headroom) ` +
        `but ${ctx.device.name} has ${mib(free)} free of ${mib(total)}`,
    );
  }
}

/** Copies `bytes` at `src` into new weight memory on the device, and waits. */
export function upload(ctx: CudaContext, bytes: number, src: Deno.PointerObject): number {
  const ptr = ctx.memory.alloc(bytes, "weights");
  try {
    const sym = ctx.driver.sym;
    ctx.driver.check(
      "cuMemcpyHtoDAsync_v2",
      sym.cuMemcpyHtoDAsync_v2(BigInt(ptr), src, BigInt(bytes), ctx.stream),
    );
    ctx.driver.check("cuStreamSynchronize", sym.cuStreamSynchronize(ctx.stream));
  } catch (err) {
    ctx.memory.free(ptr);
    throw err;
  }
  return ptr;
}

export function uploadWeight(ctx: CudaContext, source: WeightSource): CudaWeight {
  const { name, type, rows, cols } = source;
  if (!supportedType(type)) {
    throw invalidArgument("loadWeight", `${name}: type ${type.name} is not computed on CUDA`);
  }
  if (!(rows >= 1 && cols >= 1) || cols % type.blockSize !== 0) {
    throw invalidArgument("loadWeight", `${name}: ${rows}x${cols} of ${type.name}`);
  }
  const rb = rowBytes(type, cols);
  if (source.bytes.byteLength < rows * rb) {
    throw invalidArgument(
      "loadWeight",
      `${name}: ${source.bytes.byteLength} bytes, ${rows * rb} needed`,
    );
  }
  if (rows === 1) {
    const values = new Float32Array(new ArrayBuffer(4 * cols));
    dequantizeRow(type, source.bytes, values);
    const positive = values.every((v) => v > 0 && Number.isFinite(v));
    const ptr = upload(ctx, values.byteLength, Deno.UnsafePointer.of(values)!);
    return new CudaWeight(name, ggmlTypeInfo(GgmlType.F32)!, 1, cols, ptr, 4 * cols, positive);
  }
  return new CudaWeight(name, type, rows, cols, upload(ctx, rows * rb, source.pointer), rb);
}

export function allocateKvCache(ctx: CudaContext, spec: KvCacheSpec): CudaKvCache {
  const { nLayers, nKvHeads, headDim, blockSize, nBlocks } = spec;
  for (const [k, v] of Object.entries({ nLayers, nKvHeads, headDim, blockSize, nBlocks })) {
    if (!(Number.isSafeInteger(v) && v >= 1)) {
      throw invalidArgument("createKvCache", `${k} = ${v}`);
    }
  }
  const problem = kvDTypeProblem(spec.dtype, headDim);
  if (problem !== null) throw invalidArgument("createKvCache", problem);
  const perLayer = kvLayerBytes(spec);
  ensureFits(ctx, kvCacheBytes(spec), "the KV cache");
  const k: number[] = [];
  const v: number[] = [];
  try {
    for (let l = 0; l < nLayers; l++) {
      for (const list of [k, v]) {
        const ptr = ctx.memory.alloc(perLayer, "kv");
        list.push(ptr);
        // Zeroed like the reference's: a slot read before it is written holds 0, not NaN.
        ctx.driver.check(
          "cuMemsetD8Async",
          ctx.driver.sym.cuMemsetD8Async(BigInt(ptr), 0, BigInt(perLayer), ctx.stream),
        );
      }
    }
    ctx.sync();
  } catch (err) {
    for (const p of [...k, ...v]) ctx.memory.free(p);
    throw err;
  }
  return new CudaKvCache({ ...spec }, kvCacheBytes(spec), k, v);
}

/** Copies positions [0, rows) of block `from` into block `to`, K and V of every layer, in
 * stream order after the recorded launches (they may write either block). */
export function copyKvRows(
  ctx: CudaContext,
  cache: CudaKvCache,
  from: number,
  to: number,
  rows: number,
): void {
  const problem = kvCopyProblem(cache.spec, from, to, rows);
  if (problem !== null) throw invalidArgument("copyKvRows", problem);
  ctx.flush();
  const rowBytes = kvRowBytes(cache.spec);
  const blockBytes = cache.spec.blockSize * rowBytes;
  for (const base of [...cache.k, ...cache.v]) {
    const rc = ctx.driver.sym.cuMemcpyDtoDAsync_v2(
      BigInt(base + to * blockBytes),
      BigInt(base + from * blockBytes),
      BigInt(rows * rowBytes),
      ctx.stream,
    );
    ctx.driver.check("cuMemcpyDtoDAsync", rc);
  }
}

/** GB/s of timed device-to-device copies of up to `bytes` (read + written bytes). */
export function copyBandwidth(ctx: CudaContext, bytes: number): number {
  ctx.sync();
  const size = Math.max(1 << 20, Math.min(bytes, Math.floor(ctx.driver.memInfo().free / 8)));
  const src = ctx.driver.memAlloc(size);
  const dst = ctx.driver.memAlloc(size);
  const start = ctx.driver.eventCreate(0);
  const end = ctx.driver.eventCreate(0);
  const sym = ctx.driver.sym;
  const copy = (): void => {
    ctx.driver.check(
      "cuMemcpyDtoDAsync_v2",
      sym.cuMemcpyDtoDAsync_v2(BigInt(dst.ptr), BigInt(src.ptr), BigInt(size), ctx.stream),
    );
  };
  try {
    ctx.driver.check("cuMemAlloc_v2", src.rc || dst.rc);
    copy();
    const reps = 10;
    ctx.driver.check("cuEventRecord", sym.cuEventRecord(start, ctx.stream));
    for (let i = 0; i < reps; i++) copy();
    ctx.driver.check("cuEventRecord", sym.cuEventRecord(end, ctx.stream));
    ctx.driver.check("cuEventSynchronize", sym.cuEventSynchronize(end));
    const ms = ctx.driver.elapsedMs(start, end);
    return (2 * size * reps) / (ms / 1000) / 1e9;
  } finally {
    ctx.driver.check("cuEventDestroy_v2", sym.cuEventDestroy_v2(start));
    ctx.driver.check("cuEventDestroy_v2", sym.cuEventDestroy_v2(end));
    if (src.ptr) ctx.driver.memFree(src.ptr);
    if (dst.ptr) ctx.driver.memFree(dst.ptr);
  }
}
