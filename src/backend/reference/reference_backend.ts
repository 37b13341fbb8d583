/**
 * The reference backend: every op in plain TypeScript over f32 arrays, weights dequantized
 * once with the GGUF reference dequantizers. Slow and obviously correct; it is the oracle
 * the native CPU and CUDA backends are compared with, llm.c style.
 */

import { dequantizeRow as heldValues, quantizeRow, roundThroughQ8 } from "./kv_quant.ts";
import { argmax, maskedArgmax } from "../../common/argmax.ts";
import { dequantizeRow } from "../../gguf/dequant/mod.ts";
import { rowBytes } from "../../gguf/types.ts";
import {
  type Activation,
  type AttentionShape,
  type Backend,
  type Collective,
  type ExpertSource,
  type ExpertWeight,
  hadamardProblem,
  type KvCache,
  type KvCacheSpec,
  kvCopyProblem,
  readHostValues,
  type RopeSpec,
  type Step,
  type StepLayout,
  type Weight,
  type WeightSource,
} from "../backend.ts";
import type { GgmlTypeInfo } from "../../gguf/types.ts";
import { combineToken, routeToken } from "./expert_routing.ts";
import { ropeTurn } from "./rope_angle.ts";
import { hadamardChunks } from "./hadamard.ts";

class RefWeight implements Weight {
  constructor(
    readonly name: string,
    readonly type: GgmlTypeInfo,
    readonly rows: number,
    readonly cols: number,
    readonly values: Float32Array,
  ) {}
}

class RefExperts implements ExpertWeight {
  constructor(
    readonly name: string,
    readonly type: GgmlTypeInfo,
    readonly experts: number,
    readonly rows: number,
    readonly cols: number,
    /** One expert's rows x cols after another. */
    readonly values: Float32Array,
  ) {}
}

class RefActivation implements Activation {
  constructor(readonly rows: number, readonly cols: number, readonly data: Float32Array) {}
}

class RefKvCache implements KvCache {
  readonly k: Float32Array[];
  readonly v: Float32Array[];
  readonly bytes: number;

  constructor(readonly spec: KvCacheSpec) {
    const perLayer = spec.nBlocks * spec.blockSize * spec.nKvHeads * spec.headDim;
    this.k = Array.from({ length: spec.nLayers }, () => new Float32Array(perLayer));
    this.v = Array.from({ length: spec.nLayers }, () => new Float32Array(perLayer));
    this.bytes = 2 * spec.nLayers * perLayer * 4;
  }

  /** Offset of (position, kv head) in a layer's array, through the block table. */
  slot(blockTable: Int32Array, position: number, kvHead: number): number {
    const { blockSize, nKvHeads, headDim } = this.spec;
    const block = blockTable[Math.floor(position / blockSize)];
    return ((block * blockSize + (position % blockSize)) * nKvHeads + kvHead) * headDim;
  }
}

function act(a: Activation): RefActivation {
  return a as RefActivation;
}

function weight(w: Weight): RefWeight {
  return w as RefWeight;
}

export class ReferenceBackend implements Backend {
  readonly kind = "reference" as const;

  loadWeight(source: WeightSource): Weight {
    const values = new Float32Array(source.rows * source.cols);
    dequantizeRow(source.type, source.bytes, values);
    return new RefWeight(source.name, source.type, source.rows, source.cols, values);
  }

  loadExperts(source: ExpertSource): ExpertWeight {
    const { experts, rows, cols, expertStride } = source;
    const size = rows * cols;
    const bytes = rows * rowBytes(source.type, cols);
    const values = new Float32Array(experts * size);
    for (let e = 0; e < experts; e++) {
      const at = e * expertStride;
      dequantizeRow(
        source.type,
        source.bytes.subarray(at, at + bytes),
        values.subarray(e * size, (e + 1) * size),
      );
    }
    return new RefExperts(source.name, source.type, experts, rows, cols, values);
  }

  activation(rows: number, cols: number): Activation {
    return new RefActivation(rows, cols, new Float32Array(rows * cols));
  }

  rowsOf(a: Activation, rows: number): Activation {
    const r = act(a);
    return new RefActivation(rows, r.cols, r.data.subarray(0, rows * r.cols));
  }

  free(_a: Activation): void {}

  createKvCache(spec: KvCacheSpec): KvCache {
    return new RefKvCache(spec);
  }

  copyKvRows(cache: KvCache, from: number, to: number, rows: number): void {
    const c = cache as RefKvCache;
    const problem = kvCopyProblem(c.spec, from, to, rows);
    if (problem !== null) throw new RangeError(`copyKvRows: ${problem}`);
    const row = c.spec.nKvHeads * c.spec.headDim;
    const block = c.spec.blockSize * row;
    for (const a of [...c.k, ...c.v]) {
      a.copyWithin(to * block, from * block, from * block + rows * row);
    }
  }

  runStep(_step: Step, _cache: KvCache, ops: () => void): void {
    ops();
  }

  embed(out: Activation, table: Weight, ids: Int32Array): void {
    const o = act(out).data;
    const t = weight(table);
    for (let i = 0; i < ids.length; i++) {
      o.set(t.values.subarray(ids[i] * t.cols, (ids[i] + 1) * t.cols), i * t.cols);
    }
  }

  rmsNorm(out: Activation, x: Activation, w: Weight, dim: number, eps: number): void {
    const src = act(x).data;
    const dst = act(out).data;
    const g = weight(w).values;
    for (let base = 0; base < src.length; base += dim) {
      let sumSq = 0;
      for (let i = 0; i < dim; i++) sumSq += src[base + i] * src[base + i];
      const inv = 1 / Math.sqrt(sumSq / dim + eps);
      for (let i = 0; i < dim; i++) dst[base + i] = src[base + i] * inv * g[i];
    }
  }

  matmul(out: Activation, w: Weight, x: Activation): void {
    const W = weight(w);
    const xs = act(x).data;
    const ys = act(out).data;
    const { rows, cols } = W;
    for (let t = 0; t < act(x).rows; t++) {
      const xo = t * cols;
      for (let r = 0; r < rows; r++) {
        let sum = 0;
        const wo = r * cols;
        for (let c = 0; c < cols; c++) sum += W.values[wo + c] * xs[xo + c];
        ys[t * rows + r] = sum;
      }
    }
  }

  rope(x: Activation, layout: StepLayout, nHeads: number, headDim: number, spec: RopeSpec): void {
    const data = act(x).data;
    const half = headDim / 2;
    const factors = spec.freqFactors === null ? null : weight(spec.freqFactors).values;
    // The two features a pair rotates: i and i + d/2 (NeoX), or 2i and 2i + 1 (NORM).
    const [stride, gap] = spec.style === "neox" ? [1, half] : [2, 1];
    for (let t = 0; t < act(x).rows; t++) {
      const pos = layout.positions[t];
      for (let h = 0; h < nHeads; h++) {
        const base = (t * nHeads + h) * headDim;
        for (let i = 0; i < half; i++) {
          const turn = ropeTurn(spec, pos, i, headDim, factors === null ? 1 : factors[i]);
          const c = Math.cos(turn.angle) * turn.mscale;
          const s = Math.sin(turn.angle) * turn.mscale;
          const ia = base + i * stride;
          const a = data[ia];
          const b = data[ia + gap];
          data[ia] = a * c - b * s;
          data[ia + gap] = a * s + b * c;
        }
      }
    }
  }

  hadamard(a: Activation, n: number): void {
    const problem = hadamardProblem(act(a).cols, n);
    if (problem !== null) throw new RangeError(`hadamard: ${problem}`);
    hadamardChunks(act(a).data, n);
  }

  storeKv(cache: KvCache, layer: number, k: Activation, v: Activation, layout: StepLayout): void {
    const c = cache as RefKvCache;
    const { nKvHeads, headDim, dtype } = c.spec;
    // A quantized cache holds what its blocks stand for; f16 is kept exact (f32).
    const held = (x: Float32Array): Float32Array =>
      dtype === "q8_0" || dtype === "q4_0" ? heldValues(dtype, quantizeRow(dtype, x)) : x;
    for (const seq of layout.sequences) {
      for (let t = seq.rowStart; t < seq.rowStart + seq.rowCount; t++) {
        for (let h = 0; h < nKvHeads; h++) {
          const at = c.slot(seq.blockTable, layout.positions[t], h);
          const from = (t * nKvHeads + h) * headDim;
          c.k[layer].set(held(act(k).data.subarray(from, from + headDim)), at);
          c.v[layer].set(held(act(v).data.subarray(from, from + headDim)), at);
        }
      }
    }
  }

  attention(
    out: Activation,
    q: Activation,
    cache: KvCache,
    layer: number,
    layout: StepLayout,
    shape: AttentionShape,
  ): void {
    const c = cache as RefKvCache;
    const { nHeads, nKvHeads, headDim, scale } = shape;
    const window = shape.window ?? 0;
    const group = nHeads / nKvHeads;
    // Against a quantized K, queries take part as q8_0 blocks (as in llama.cpp's dot).
    const quantized = c.spec.dtype === "q8_0" || c.spec.dtype === "q4_0";
    const qs = quantized ? roundThroughQ8(act(q).data) : act(q).data;
    const os = act(out).data;
    for (const seq of layout.sequences) {
      for (let t = seq.rowStart; t < seq.rowStart + seq.rowCount; t++) {
        const last = layout.positions[t];
        const first = window > 0 ? Math.max(0, last - window + 1) : 0;
        const scores = new Float64Array(last + 1);
        for (let h = 0; h < nHeads; h++) {
          const kvHead = Math.floor(h / group);
          const qo = (t * nHeads + h) * headDim;
          let max = -Infinity;
          for (let p = first; p <= last; p++) {
            const ko = c.slot(seq.blockTable, p, kvHead);
            let dot = 0;
            for (let i = 0; i < headDim; i++) dot += qs[qo + i] * c.k[layer][ko + i];
            scores[p] = dot * scale;
            if (scores[p] > max) max = scores[p];
          }
          let denom = 0;
          for (let p = first; p <= last; p++) {
            scores[p] = Math.exp(scores[p] - max);
            denom += scores[p];
          }
          for (let i = 0; i < headDim; i++) {
            let sum = 0;
            for (let p = first; p <= last; p++) {
              sum += scores[p] * c.v[layer][c.slot(seq.blockTable, p, kvHead) + i];
            }
            os[qo + i] = sum / denom;
          }
        }
      }
    }
  }

  siluMul(out: Activation, gate: Activation, up: Activation): void {
    const g = act(gate).data;
    const u = act(up).data;
    const o = act(out).data;
    for (let i = 0; i < g.length; i++) o[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
  }

  geluMul(out: Activation, gate: Activation, up: Activation): void {
    const g = act(gate).data;
    const u = act(up).data;
    const o = act(out).data;
    const k = Math.sqrt(2 / Math.PI);
    for (let i = 0; i < g.length; i++) {
      const x = g[i];
      o[i] = 0.5 * x * (1 + Math.tanh(k * (x + 0.044715 * x * x * x))) * u[i];
    }
  }

  addBias(out: Activation, a: Activation, bias: Weight): void {
    const { cols, data: x } = act(a);
    const b = weight(bias).values;
    const o = act(out).data;
    for (let i = 0; i < x.length; i++) o[i] = x[i] + b[i % cols];
  }

  scale(out: Activation, a: Activation, factor: number): void {
    const x = act(a).data;
    const o = act(out).data;
    for (let i = 0; i < x.length; i++) o[i] = x[i] * factor;
  }

  add(out: Activation, a: Activation, b: Activation): void {
    const x = act(a).data;
    const y = act(b).data;
    const o = act(out).data;
    for (let i = 0; i < x.length; i++) o[i] = x[i] + y[i];
  }

  routeExperts(ids: Activation, weights: Activation, logits: Activation, normalize: boolean): void {
    const l = act(logits);
    const k = ids.cols;
    const chosen = new Int32Array(k);
    for (let t = 0; t < l.rows; t++) {
      const w = act(weights).data.subarray(t * k, (t + 1) * k);
      routeToken(l.data.subarray(t * l.cols, (t + 1) * l.cols), normalize, chosen, w);
      act(ids).data.set(chosen, t * k);
    }
  }

  matmulExperts(outs: Activation[], ws: ExpertWeight[], x: Activation, ids: Activation): void {
    const { rows: tokens, cols: k, data: chosen } = act(ids);
    const xs = act(x);
    const perSlot = xs.rows !== tokens;
    ws.forEach((w, m) => {
      const W = w as RefExperts;
      const ys = act(outs[m]).data;
      for (let s = 0; s < tokens * k; s++) {
        const base = chosen[s] * W.rows * W.cols;
        const xo = (perSlot ? s : Math.floor(s / k)) * W.cols;
        for (let r = 0; r < W.rows; r++) {
          let sum = 0;
          const wo = base + r * W.cols;
          for (let c = 0; c < W.cols; c++) sum += W.values[wo + c] * xs.data[xo + c];
          ys[s * W.rows + r] = sum;
        }
      }
    });
  }

  combineExperts(out: Activation, experts: Activation, weights: Activation): void {
    const o = act(out);
    const w = act(weights);
    const k = w.cols;
    for (let t = 0; t < o.rows; t++) {
      combineToken(
        o.data.subarray(t * o.cols, (t + 1) * o.cols),
        act(experts).data.subarray(t * k * o.cols, (t + 1) * k * o.cols),
        w.data.subarray(t * k, (t + 1) * k),
      );
    }
  }

  gatherRows(out: Activation, a: Activation, rows: Int32Array): void {
    const src = act(a);
    const dst = act(out).data;
    for (let i = 0; i < rows.length; i++) {
      dst.set(src.data.subarray(rows[i] * src.cols, (rows[i] + 1) * src.cols), i * src.cols);
    }
  }

  allReduce(a: Activation, group: Collective): void {
    const data = act(a).data;
    const address = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(data)));
    group.allReduceSum(address, data.length, "f32", null);
  }

  matmulMany(outs: Activation[], ws: Weight[], x: Activation): void {
    ws.forEach((w, i) => this.matmul(outs[i], w, x));
  }

  /** Every op has run when it returns: nothing is queued here. */
  synchronize(): boolean {
    return true;
  }

  argmaxRows(a: Activation, masks?: readonly (Uint32Array | null)[]): Int32Array {
    const { rows, cols, data } = act(a);
    return Int32Array.from({ length: rows }, (_, r) => {
      const row = data.subarray(r * cols, (r + 1) * cols);
      const mask = masks?.[r] ?? null;
      return mask === null ? argmax(row) : maskedArgmax(row, mask);
    });
  }

  read(a: Activation, into?: Float32Array): Float32Array {
    return readHostValues(act(a).data, into);
  }

  close(): void {}
}
