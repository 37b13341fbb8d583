/**
 * The Backend on the native CPU kernel library: weights are read in place from the
 * mmapped GGUF (or, with mmap off, copied into an arena on huge pages: weight_arena.ts says
 * why; weight_loader.ts places them), activations and the KV cache live in native memory,
 * and the ops run on a thread pool owned by this backend (one per model). Ops are recorded
 * in the pool's op list (their arguments checked then) and run in one FFI call when
 * something reads native memory back: read, argmaxRows, allReduce, or freeing an
 * activation they may use. A decode step's list is kept and replayed by the next step of
 * its shape (runStep, step_template.ts).
 */

import {
  type Activation,
  type AttentionShape,
  type Backend,
  type BandwidthProbe,
  type Collective,
  type ExpertSource,
  type ExpertWeight,
  type KvCache,
  kvCacheBytes,
  type KvCacheSpec,
  kvCopyProblem,
  kvDTypeProblem,
  kvRowBytes,
  type OpProfiler,
  type OpTime,
  readHostValues,
  type RopeSpec,
  type Step,
  type StepInterrupt,
  type StepLayout,
  type Weight,
  type WeightSource,
} from "../backend.ts";
import type { RowDraws } from "../row_draws.ts";
import {
  CpuKernels,
  MATMUL_MANY_MAX,
  type NativeBuffer,
  type Pool,
  ROPE_NEOX,
  ROPE_NORM,
} from "./kernels.ts";
import { CpuKernelError } from "./errors.ts";
import { ensureHostFits } from "./host_memory.ts";
import { CpuKvCache } from "./kv_cache.ts";
import { act, CpuActivation, pointerOf, weight } from "./handles.ts";
import { recordCombine, recordMatmulExperts, recordRoute } from "./cpu_experts.ts";
import { StepKeys } from "./step_template.ts";
import { WeightLoader } from "./weight_loader.ts";

export interface CpuBackendOptions {
  /** Threads in the pool (0 = one per CPU). */
  threads: number;
  /** Path of the kernel library (default: resolved by library.ts). */
  libraryPath?: string;
  /**
   * True (default): weights are read in place from the mmapped GGUF. False: they are copied
   * at load into anonymous memory on huge pages (weight_arena.ts says when that is faster),
   * like llama.cpp's --no-mmap.
   */
  mmap?: boolean;
  /** True (default): Q8_0, Q4_K and Q6_K matrices and expert stacks are repacked at load into the
   * arena, whatever `mmap` says (repacked.ts); false keeps every weight in its GGUF layout. */
  repack?: boolean;
}

export class CpuBackend implements Backend, BandwidthProbe, OpProfiler, RowDraws {
  readonly kind = "cpu" as const;
  readonly kernels: CpuKernels;
  readonly pool: Pool;
  readonly #owned = new Set<NativeBuffer>();
  readonly #loader: WeightLoader;
  /** Where argmaxRows's picks land (grown on demand). */
  #picks: NativeBuffer | null = null;
  readonly #stepKeys = new StepKeys();

  constructor(options: CpuBackendOptions) {
    this.kernels = new CpuKernels(options.libraryPath);
    this.pool = this.kernels.createPool(options.threads);
    this.#loader = new WeightLoader(
      this.kernels,
      this.pool,
      options.mmap ?? true,
      options.repack ?? true,
    );
  }

  loadWeight(source: WeightSource): Weight {
    return this.#loader.loadWeight(source);
  }

  loadExperts(source: ExpertSource): ExpertWeight {
    return this.#loader.loadExperts(source);
  }

  activation(rows: number, cols: number): Activation {
    // Recorded steps name buffers by address: a step's ops may use this one from now on.
    this.pool.queue.forgetSteps();
    const buffer = this.kernels.alloc(rows * cols * 4);
    this.#owned.add(buffer);
    return new CpuActivation(rows, cols, buffer, true);
  }

  rowsOf(a: Activation, rows: number): Activation {
    const src = act(a);
    return new CpuActivation(rows, src.cols, src.buffer, false);
  }

  free(a: Activation): void {
    const src = act(a);
    if (!src.owner) return;
    this.pool.queue.flush();
    this.pool.queue.forgetSteps();
    src.buffer.free();
    this.#owned.delete(src.buffer);
  }

  createKvCache(spec: KvCacheSpec): KvCache {
    const problem = kvDTypeProblem(spec.dtype, spec.headDim);
    if (problem !== null) {
      throw new CpuKernelError("cpu_kernel_invalid", `createKvCache: ${problem}`);
    }
    ensureHostFits(kvCacheBytes(spec), "the KV cache");
    this.pool.queue.forgetSteps();
    return new CpuKvCache(spec, this.kernels, (b) => {
      this.#owned.add(b);
      return b;
    }, (b) => this.pool.prefault(b));
  }

  copyKvRows(cache: KvCache, from: number, to: number, rows: number): void {
    const c = cache as CpuKvCache;
    const problem = kvCopyProblem(c.spec, from, to, rows);
    if (problem !== null) throw new CpuKernelError("cpu_kernel_invalid", `copyKvRows: ${problem}`);
    const rowBytes = kvRowBytes(c.spec);
    const blockBytes = c.spec.blockSize * rowBytes;
    // Steps recorded before this may still write either block.
    this.pool.queue.flush();
    for (const buffer of [...c.k, ...c.v]) {
      buffer.u8().copyWithin(
        to * blockBytes,
        from * blockBytes,
        from * blockBytes + rows * rowBytes,
      );
    }
  }

  embed(out: Activation, table: Weight, ids: Int32Array): void {
    const t = weight(table);
    this.pool.queue.getRows(t.kernelType, t.pointer, t.rows, t.cols, ids, act(out).pointer);
  }

  rmsNorm(out: Activation, x: Activation, w: Weight, dim: number, eps: number): void {
    const a = act(x);
    const nRows = (a.rows * a.cols) / dim;
    this.pool.queue.rmsnorm(act(out).pointer, a.pointer, weight(w).pointer, nRows, dim, eps);
  }

  matmul(out: Activation, w: Weight, x: Activation): void {
    const W = weight(w);
    this.pool.queue.matmul(
      W.kernelType,
      W.pointer,
      W.rows,
      W.cols,
      act(x).pointer,
      act(x).rows,
      act(out).pointer,
    );
  }

  matmulMany(outs: Activation[], ws: Weight[], x: Activation): void {
    if (outs.length !== ws.length) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `matmulMany: ${outs.length} outputs for ${ws.length} weights`,
      );
    }
    const a = act(x);
    const cols = weight(ws[0]).cols;
    if (ws.some((w) => weight(w).cols !== cols)) {
      throw new CpuKernelError("cpu_kernel_invalid", "matmulMany: weights of different widths");
    }
    for (let i = 0; i < ws.length; i += MATMUL_MANY_MAX) {
      const mats = ws.slice(i, i + MATMUL_MANY_MAX).map((w, j) => {
        const W = weight(w);
        return { type: W.kernelType, w: W.pointer, rows: W.rows, y: act(outs[i + j]).pointer };
      });
      this.pool.queue.matmulMany(mats, cols, a.pointer, a.rows);
    }
  }

  rope(x: Activation, layout: StepLayout, nHeads: number, headDim: number, spec: RopeSpec): void {
    const a = act(x);
    this.pool.queue.rope(a.pointer, a.rows, nHeads, headDim, layout.positions, {
      freqBase: spec.base,
      freqScale: spec.freqScale,
      freqFactors: spec.freqFactors === null ? null : this.#f32(spec.freqFactors, "freqFactors"),
      mode: spec.style === "neox" ? ROPE_NEOX : ROPE_NORM,
      yarn: spec.yarn,
    });
  }

  storeKv(cache: KvCache, layer: number, k: Activation, v: Activation, layout: StepLayout): void {
    const c = cache as CpuKvCache;
    this.pool.queue.kvStore(
      c.layout,
      c.k[layer],
      c.v[layer],
      layout.sequences,
      layout.positions,
      act(k).pointer,
      act(v).pointer,
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
    const c = cache as CpuKvCache;
    this.pool.queue.attention(
      c.layout,
      act(out).pointer,
      act(q).pointer,
      c.k[layer],
      c.v[layer],
      layout.sequences,
      layout.positions,
      shape.nHeads,
      shape.scale,
      shape.window ?? 0,
    );
  }

  siluMul(out: Activation, gate: Activation, up: Activation): void {
    const g = act(gate);
    this.pool.queue.siluMul(act(out).pointer, g.pointer, act(up).pointer, g.rows * g.cols);
  }

  add(out: Activation, a: Activation, b: Activation): void {
    const x = act(a);
    this.pool.queue.add(act(out).pointer, x.pointer, act(b).pointer, x.rows * x.cols);
  }

  geluMul(out: Activation, gate: Activation, up: Activation): void {
    const g = act(gate);
    this.pool.queue.geluMul(act(out).pointer, g.pointer, act(up).pointer, g.rows * g.cols);
  }

  addBias(out: Activation, a: Activation, bias: Weight): void {
    const x = act(a);
    const b = this.#f32(bias, "addBias");
    this.pool.queue.addBias(act(out).pointer, x.pointer, b, x.rows * x.cols, x.cols);
  }

  scale(out: Activation, a: Activation, factor: number): void {
    const x = act(a);
    this.pool.queue.scale(act(out).pointer, x.pointer, factor, x.rows * x.cols);
  }

  hadamard(a: Activation, n: number): void {
    const x = act(a);
    this.pool.queue.hadamard(x.pointer, x.rows, x.cols, n);
  }

  /** The address of an f32 vector weight (biases, rope factors): the ops read it as f32. */
  #f32(w: Weight, op: string): Deno.PointerObject {
    const v = weight(w);
    if (v.type.name !== "F32") {
      throw new CpuKernelError("cpu_kernel_invalid", `${op}: ${v.name} is ${v.type.name}, not F32`);
    }
    return v.pointer;
  }

  routeExperts(ids: Activation, weights: Activation, logits: Activation, normalize: boolean): void {
    recordRoute(this.pool.queue, pointerOf, ids, weights, logits, normalize);
  }

  matmulExperts(outs: Activation[], ws: ExpertWeight[], x: Activation, ids: Activation): void {
    recordMatmulExperts(this.pool.queue, pointerOf, outs, ws, x, ids);
  }

  combineExperts(out: Activation, experts: Activation, weights: Activation): void {
    recordCombine(this.pool.queue, pointerOf, out, experts, weights);
  }

  gatherRows(out: Activation, a: Activation, rows: Int32Array): void {
    const src = act(a);
    this.pool.queue.gatherRows(act(out).pointer, src.pointer, src.rows, src.cols, rows);
  }

  /** Replays the last step recorded with this step's key, else records `ops`. */
  runStep(step: Step, cache: KvCache, ops: () => void): void {
    const key = this.#stepKeys.keyOf(step, cache);
    const queue = this.pool.queue;
    if (queue.replayStep(key, step)) return;
    queue.beginStep(key, step);
    ops();
    queue.endStep();
  }

  allReduce(a: Activation, group: Collective): void {
    this.pool.queue.flush();
    const x = act(a);
    group.allReduceSum(BigInt(Deno.UnsafePointer.value(x.pointer)), x.rows * x.cols, "f32", null);
  }

  bandwidthGBs(): number {
    return this.pool.bandwidth(512 * 1024 * 1024, 5);
  }

  profileOps(on: boolean): void {
    this.pool.queue.profileOps(on);
  }

  takeOpProfile(): OpTime[] {
    return this.pool.queue.takeOpProfile();
  }

  synchronize(interrupt?: StepInterrupt): boolean {
    return this.pool.queue.flush(interrupt);
  }

  /**
   * Greedy decoding's argmax, on the native rows: no copy of the logits to the JS heap. It
   * runs in the same native call as the ops queued before it (the step that wrote them).
   */
  argmaxRows(a: Activation, masks?: readonly (Uint32Array | null)[]): Int32Array {
    const src = act(a);
    if (src.rows === 0) {
      this.pool.queue.flush();
      return new Int32Array(0);
    }
    if (this.#picks === null || this.#picks.byteLength < 4 * src.rows) {
      this.#picks?.free();
      this.#picks = this.kernels.alloc(4 * Math.max(src.rows, 64));
    }
    this.pool.queue.argmaxRows(src.pointer, src.rows, src.cols, this.#picks, masks);
    this.pool.queue.flush();
    return this.#picks.i32().slice(0, src.rows);
  }

  /** RowDraws (row_draws.ts) over this backend's pool. */
  drawRows(...a: Parameters<Pool["drawRows"]>): Int32Array {
    return this.pool.drawRows(...a);
  }

  read(a: Activation, into?: Float32Array): Float32Array {
    this.pool.queue.flush();
    const src = act(a);
    return readHostValues(src.buffer.f32().subarray(0, src.rows * src.cols), into);
  }

  close(): void {
    // What the recorded ops would compute can no longer be read.
    this.pool.queue.discard();
    for (const b of this.#owned) b.free();
    this.#owned.clear();
    this.#picks?.free();
    this.#picks = null;
    this.#loader.free();
    this.pool.destroy();
  }
}
