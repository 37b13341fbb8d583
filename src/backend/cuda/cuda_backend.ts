/**
 * The CUDA backend. Ops are recorded on a tape as the model calls them and sent to the
 * GPU at the next point where the host needs a result (read, argmaxRows, free, close):
 * everything in between runs asynchronously on one stream, and a step seen twice becomes a
 * CUDA graph (runner.ts). Weights are copied to the device once at load; 1-row tensors
 * (norm weights) are expanded to f32 there.
 *
 * Beyond the Backend interface it offers DeviceMemory: `ensureFits` (refuses a model
 * before allocating when the GPU is too full) and `deviceBytes` (what /models reports as
 * vram_used_mb; `memoryUsage` has it per kind), and a BandwidthProbe.
 */

import type {
  Activation,
  AttentionShape,
  Backend,
  BandwidthProbe,
  Collective,
  DeviceMemory,
  ExpertSource,
  ExpertWeight,
  KvCache,
  KvCacheSpec,
  RopeSpec,
  Step,
  StepLayout,
  Weight,
  WeightSource,
} from "../backend.ts";
import { readTarget } from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { CudaError, invalidArgument } from "./errors.ts";
import { ccString } from "./flavour.ts";
import { allocateKvCache, copyBandwidth, copyKvRows, ensureFits, uploadWeight } from "./loading.ts";
import type { MemoryUsage } from "./memory.ts";
import { recordArgmax } from "./ops_argmax.ts";
import { recordAttention, recordStoreKv } from "./ops_attention.ts";
import {
  launchBinary,
  operands,
  recordAddBias,
  recordHadamard,
  recordScale,
} from "./ops_elementwise.ts";
import { recordMatmul } from "./ops_matmul.ts";
import {
  asExperts,
  recordCombine,
  recordMatmulExperts,
  recordRoute,
  uploadExperts,
} from "./ops_moe.ts";
import { recordRope } from "./ops_rope.ts";
import { recordEmbed, recordGatherRows } from "./ops_rows.ts";
import { fuseGateUp, noted, recordHeadNorm, recordRowNorm } from "./fusion.ts";
import { asActivation, asCache, asWeight, CudaActivation } from "./resources.ts";
import type { RunnerStats } from "./runner.ts";

export interface CudaBackendInfo {
  device: string;
  computeCapability: string;
  flavour: string;
  /** Exact-architecture cubins, or PTX compiled by the driver at load. */
  image: "cubin" | "ptx";
  cublas: boolean;
  graphs: boolean;
  totalBytes: number;
}

export class CudaBackend implements Backend, DeviceMemory, BandwidthProbe {
  readonly kind = "cuda" as const;
  readonly #ctx: CudaContext;
  #closed = false;

  constructor(ctx: CudaContext) {
    this.#ctx = ctx;
  }

  /** The device this backend computes on. */
  get deviceName(): string {
    return this.#ctx.device.name;
  }

  get deviceIndex(): number {
    return this.#ctx.device.index;
  }

  /** What was chosen at start: kernel flavour and image, cuBLAS, graphs. */
  info(): CudaBackendInfo {
    const ctx = this.#ctx;
    return {
      device: ctx.device.name,
      computeCapability: ccString(ctx.device.cc),
      flavour: ctx.flavour.flavour.name,
      image: ctx.image,
      cublas: ctx.cublas !== null,
      graphs: ctx.graphs !== null,
      totalBytes: ctx.device.totalBytes,
    };
  }

  #live(): CudaContext {
    if (this.#closed) throw new CudaError("cuda_error", "the CUDA backend is closed");
    return this.#ctx;
  }

  /** Throws `cuda_out_of_memory` unless `bytes` more fit on the device, with headroom. */
  ensureFits(bytes: number, what = "the model"): void {
    ensureFits(this.#live(), bytes, what);
  }

  deviceBytes(): number {
    return this.memoryUsage().total;
  }

  memoryUsage(): MemoryUsage {
    return this.#live().memory.usage();
  }

  stats(): RunnerStats {
    return { ...this.#live().runner.stats };
  }

  loadWeight(source: WeightSource): Weight {
    return uploadWeight(this.#live(), source);
  }

  loadExperts(source: ExpertSource): ExpertWeight {
    return uploadExperts(this.#live(), source);
  }

  activation(rows: number, cols: number): Activation {
    if (!(Number.isSafeInteger(rows) && rows >= 1 && Number.isSafeInteger(cols) && cols >= 1)) {
      throw invalidArgument("activation", `${rows}x${cols}`);
    }
    const ptr = this.#live().memory.alloc(rows * cols * 4, "activations");
    return new CudaActivation(rows, cols, ptr, null);
  }

  rowsOf(a: Activation, rows: number): Activation {
    const x = asActivation(a, "rowsOf");
    if (!(Number.isInteger(rows) && rows >= 0 && rows <= x.rows)) {
      throw invalidArgument("rowsOf", `${rows} rows of ${x.rows}`);
    }
    return new CudaActivation(rows, x.cols, x.ptr, x.base ?? x);
  }

  free(a: Activation): void {
    const x = asActivation(a, "free");
    if (x.base !== null) throw invalidArgument("free", "a view (rowsOf) is not freed on its own");
    if (x.freed) return;
    const ctx = this.#live();
    // Graphs name this memory; recorded launches run before anything reuses it.
    ctx.graphs?.clear();
    ctx.flush();
    ctx.memory.free(x.release());
  }

  createKvCache(spec: KvCacheSpec): KvCache {
    return allocateKvCache(this.#live(), spec);
  }

  copyKvRows(cache: KvCache, from: number, to: number, rows: number): void {
    copyKvRows(this.#live(), asCache(cache, "copyKvRows"), from, to, rows);
  }

  /** Records `ops` on the tape; a step seen twice is replayed as a CUDA graph (runner.ts). */
  runStep(_step: Step, _cache: KvCache, ops: () => void): void {
    ops();
  }

  embed(out: Activation, table: Weight, ids: Int32Array): void {
    this.#wrote(recordEmbed(this.#live(), out, table, ids));
  }

  rmsNorm(out: Activation, x: Activation, weight: Weight, dim: number, eps: number): void {
    const o = asActivation(out, "rmsNorm");
    const xs = asActivation(x, "rmsNorm");
    const w = asWeight(weight, "rmsNorm");
    if (
      w.rows !== 1 || w.cols !== dim || xs.cols % dim !== 0 || o.cols !== xs.cols ||
      o.rows < xs.rows
    ) {
      throw invalidArgument("rmsNorm", `${xs.rows}x${xs.cols} by groups of ${dim} with ${w.name}`);
    }
    const ctx = this.#live();
    if (dim === xs.cols) {
      recordRowNorm(ctx, o, xs, w, eps);
    } else if (o.ptr === xs.ptr && o.rows === xs.rows) {
      recordHeadNorm(ctx, xs, w, dim, eps);
    } else {
      const groups = (xs.rows * xs.cols) / dim;
      ctx.runner.tape.launch(ctx.k("rms_norm_warp"), Math.ceil(groups / 4), 1, 1, 128)
        .p(o.ptr).p(xs.ptr).p(w.ptr).i(groups).i(dim).f(eps).end();
    }
    this.#wrote(o);
  }

  matmul(out: Activation, w: Weight, x: Activation): void {
    const o = asActivation(out, "matmul");
    recordMatmul(this.#live(), o, asWeight(w, "matmul"), asActivation(x, "matmul"));
    this.#wrote(o);
  }

  /** One product after another: they share x's quantized copy (ops_matmul.ts) already. */
  matmulMany(outs: Activation[], ws: Weight[], x: Activation): void {
    ws.forEach((w, i) => this.matmul(outs[i], w, x));
  }

  rope(x: Activation, layout: StepLayout, nHeads: number, headDim: number, spec: RopeSpec): void {
    const xs = asActivation(x, "rope");
    recordRope(this.#live(), xs, layout, nHeads, headDim, spec);
    this.#wrote(xs);
  }

  storeKv(cache: KvCache, layer: number, k: Activation, v: Activation, layout: StepLayout): void {
    recordStoreKv(
      this.#live(),
      asCache(cache, "storeKv"),
      layer,
      asActivation(k, "storeKv"),
      asActivation(v, "storeKv"),
      layout,
    );
  }

  attention(
    out: Activation,
    q: Activation,
    cache: KvCache,
    layer: number,
    layout: StepLayout,
    shape: AttentionShape,
  ): void {
    const o = asActivation(out, "attention");
    recordAttention(
      this.#live(),
      o,
      asActivation(q, "attention"),
      asCache(cache, "attention"),
      layer,
      layout,
      shape,
    );
    this.#wrote(o);
  }

  siluMul(out: Activation, gate: Activation, up: Activation): void {
    const v = operands("siluMul", out, gate, up);
    const ctx = this.#live();
    if (!(ctx.fusion && fuseGateUp(ctx, v.o, v.x, v.y))) launchBinary(ctx, "silu_mul", v);
    this.#wrote(v.o);
  }

  geluMul(out: Activation, gate: Activation, up: Activation): void {
    const v = operands("geluMul", out, gate, up);
    launchBinary(this.#live(), "gelu_mul", v);
    this.#wrote(v.o);
  }

  add(out: Activation, a: Activation, b: Activation): void {
    const v = operands("add", out, a, b);
    const { o, x, y } = v;
    const ctx = this.#live();
    const shaped = (m: CudaActivation): boolean => m.rows === o.rows && m.cols === o.cols;
    const body = shaped(x) && shaped(y) ? { kind: "add" as const, out: o, a: x, b: y } : null;
    noted(ctx, body, () => launchBinary(ctx, "add_f32", v));
    this.#wrote(o);
  }

  addBias(out: Activation, a: Activation, bias: Weight): void {
    this.#wrote(recordAddBias(this.#live(), out, a, bias));
  }

  scale(out: Activation, a: Activation, factor: number): void {
    this.#wrote(recordScale(this.#live(), out, a, factor));
  }

  hadamard(a: Activation, n: number): void {
    this.#wrote(recordHadamard(this.#live(), a, n));
  }

  routeExperts(ids: Activation, weights: Activation, logits: Activation, normalize: boolean): void {
    const [i, w] = [asActivation(ids, "routeExperts"), asActivation(weights, "routeExperts")];
    // Stale caches go first: the route leaves a grouping of its new ids cached (ops_moe.ts).
    this.#wrote(i);
    this.#wrote(w);
    recordRoute(this.#live(), i, w, asActivation(logits, "routeExperts"), normalize);
  }

  matmulExperts(outs: Activation[], ws: ExpertWeight[], x: Activation, ids: Activation): void {
    const os = outs.map((o) => asActivation(o, "matmulExperts"));
    const experts = ws.map((w) => asExperts(w, "matmulExperts"));
    const xs = asActivation(x, "matmulExperts");
    recordMatmulExperts(this.#live(), os, experts, xs, asActivation(ids, "matmulExperts"));
    for (const o of os) this.#wrote(o);
  }

  combineExperts(out: Activation, experts: Activation, weights: Activation): void {
    const o = asActivation(out, "combineExperts");
    const [e, w] = [
      asActivation(experts, "combineExperts"),
      asActivation(weights, "combineExperts"),
    ];
    recordCombine(this.#live(), o, e, w);
    this.#wrote(o);
  }

  gatherRows(out: Activation, a: Activation, rows: Int32Array): void {
    this.#wrote(recordGatherRows(this.#live(), out, a, rows));
  }

  /**
   * Sums `a` over the ranks of `group` in place: the collective is enqueued on this
   * backend's stream in order with the recorded kernels (steps with one are not captured
   * as graphs).
   */
  allReduce(a: Activation, group: Collective): void {
    const x = asActivation(a, "allReduce");
    const ctx = this.#live();
    const address = BigInt(x.ptr);
    const count = x.rows * x.cols;
    ctx.runner.tape.hostCall(() => group.allReduceSum(address, count, "f32", ctx.stream));
    this.#wrote(x);
  }

  read(a: Activation, into?: Float32Array): Float32Array {
    const x = asActivation(a, "read");
    const ctx = this.#live();
    const n = x.rows * x.cols;
    const out = into === undefined ? new Float32Array(new ArrayBuffer(4 * n)) : readTarget(into, n);
    this.#readInto(ctx, out, x.ptr);
    return out;
  }

  /** The index of each row's largest value (among those its mask allows), on the device. */
  argmaxRows(a: Activation, masks?: readonly (Uint32Array | null)[]): Int32Array {
    const x = asActivation(a, "argmaxRows");
    const ctx = this.#live();
    const ids = recordArgmax(ctx, x, masks);
    const out = new Int32Array(new ArrayBuffer(4 * x.rows));
    this.#readInto(ctx, out, ids);
    return out;
  }

  /** Copies device memory at `ptr` into `out` (an off-heap array: its address is taken). */
  #readInto(ctx: CudaContext, out: Float32Array | Int32Array, ptr: number): void {
    ctx.flush();
    const sym = ctx.driver.sym;
    ctx.driver.check(
      "cuMemcpyDtoHAsync_v2",
      sym.cuMemcpyDtoHAsync_v2(
        Deno.UnsafePointer.of(out),
        BigInt(ptr),
        BigInt(out.byteLength),
        ctx.stream,
      ),
    );
    ctx.driver.check("cuStreamSynchronize", sym.cuStreamSynchronize(ctx.stream));
  }

  /**
   * Device memory bandwidth in GB/s, from timed device-to-device copies of `bytes` (read
   * and written bytes both counted, as bandwidth figures for copies usually are).
   */
  bandwidthGBs(bytes = 1 << 30): number {
    return copyBandwidth(this.#live(), bytes);
  }

  /** Waits for all recorded work (timings, tests); a stream runs whole, never interrupted. */
  synchronize(): boolean {
    this.#live().sync();
    return true;
  }

  /** Cached copies of `out`'s old contents are stale once an op writes it. */
  #wrote(out: CudaActivation): void {
    const ctx = this.#ctx;
    if (ctx.quantized !== null && ctx.quantized.src.ptr === out.ptr) ctx.quantized = null;
    if (ctx.halves !== null && ctx.halves.src.ptr === out.ptr) ctx.halves = null;
    if (ctx.grouping !== null && ctx.grouping.src.ptr === out.ptr) ctx.grouping = null;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ctx.close();
  }
}
