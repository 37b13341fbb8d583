/**
 * The tape's notes (fusion.ts): what each op recorded, kept on the context until a later op
 * fuses it or a flush drops it, and the device rows they compare activations by.
 */

import type { CudaWeight } from "./resources.ts";

/** Rows of f32 on the device: what the caches and fusion notes compare activations by. */
export interface DeviceRows {
  readonly rows: number;
  readonly cols: number;
  readonly ptr: number;
}

export interface Quantized {
  xq: number;
  xd: number;
  kp: number;
}

interface Span {
  start: number;
  end: number;
}

export type Note =
  | Span & { kind: "add"; out: DeviceRows; a: DeviceRows; b: DeviceRows }
  | Span & { kind: "norm"; out: DeviceRows; x: DeviceRows; w: number; eps: number }
  | Span & {
    kind: "addNorm";
    sum: DeviceRows;
    out: DeviceRows;
    a: DeviceRows;
    b: DeviceRows;
    w: number;
    eps: number;
  }
  | Span & { kind: "headNorm"; x: DeviceRows; w: number; dim: number; eps: number }
  | Span & {
    kind: "mmvq";
    /** One to three products of the same activations, launched together. */
    parts: Array<{ out: DeviceRows; w: CudaWeight }>;
    q: Quantized;
    name: string;
    instance: number;
    n: number;
    tpr: number;
  }
  | Span & {
    kind: "experts";
    /** Two grouped expert products of the same q8_1 activations (mmvq_e_*), in turn. */
    outs: [DeviceRows, DeviceRows];
    weights: [number, number];
    launch: ExpertLaunch;
  }
  | Span & {
    kind: "combine";
    out: DeviceRows;
    acc: number;
    ml: number;
    rowSeq: number;
    heads: number;
    headDim: number;
    splits: number;
  };

/** What an mmvq_e_* launch takes besides its output and weight (ops_moe.ts). */
export interface ExpertLaunch {
  name: string;
  nt: number;
  grid: number;
  groups: number;
  stride: number;
  rows: number;
  cols: number;
  rowBytes: number;
  q: Quantized;
  order: number;
  gexp: number;
  gstart: number;
  perSlot: number;
  k: number;
  tpr: number;
}

/** Distributes Omit over the union (what `note` takes: a Note before its span is known). */
export type NoteBody = Note extends infer N ? N extends Note ? Omit<N, "start" | "end"> : never
  : never;
