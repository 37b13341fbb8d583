/**
 * Synthetic models for benchmarks, written once into the cache directory and reused, so
 * `neuron bench --synthetic qwen3-0.6b` needs no download.
 */

import { log } from "../common/log.ts";
import { QWEN3_SHAPES, writeSyntheticQwen3 } from "../models/qwen3_synthetic.ts";
import { QWEN3MOE_SHAPES, writeSyntheticQwen3Moe } from "../models/qwen3moe_synthetic.ts";
import { DENSE_SHAPES, writeSyntheticDense } from "../models/dense_synthetic.ts";
import type { FileType } from "../gguf/quant_mix.ts";
import { FILE_TYPES } from "../gguf/quant_mix.ts";

export type SyntheticShape =
  | keyof typeof QWEN3_SHAPES
  | keyof typeof QWEN3MOE_SHAPES
  | keyof typeof DENSE_SHAPES;

export const SYNTHETIC_SHAPES: readonly string[] = [
  ...Object.keys(QWEN3_SHAPES),
  ...Object.keys(QWEN3MOE_SHAPES),
  ...Object.keys(DENSE_SHAPES),
];
export const FILE_TYPE_NAMES: readonly string[] = Object.keys(FILE_TYPES);

export function isSyntheticShape(s: string): s is SyntheticShape {
  return SYNTHETIC_SHAPES.includes(s);
}

export function isFileType(s: string): s is FileType {
  return Object.hasOwn(FILE_TYPES, s);
}

/** `$XDG_CACHE_HOME/neuron`, else `~/.cache/neuron`. */
export function cacheDir(): string {
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  if (xdg) return `${xdg}/neuron`;
  const home = Deno.env.get("HOME") ?? "/tmp";
  return `${home}/.cache/neuron`;
}

/** The path of the synthetic model, written first if it is not cached yet. */
export function syntheticModel(shape: SyntheticShape, quant: FileType): string {
  const dir = `${cacheDir()}/synthetic`;
  const path = `${dir}/${shape}-${quant}.gguf`;
  try {
    Deno.statSync(path);
    return path;
  } catch {
    // Not cached yet.
  }
  Deno.mkdirSync(dir, { recursive: true });
  const started = performance.now();
  log.info("writing synthetic model", { path, shape, quant });
  if (Object.hasOwn(DENSE_SHAPES, shape)) {
    writeSyntheticDense(path, { shape: shape as keyof typeof DENSE_SHAPES, quant, seed: 1 });
  } else if (Object.hasOwn(QWEN3MOE_SHAPES, shape)) {
    writeSyntheticQwen3Moe(path, { shape: shape as keyof typeof QWEN3MOE_SHAPES, quant, seed: 1 });
  } else {
    writeSyntheticQwen3(path, { shape: shape as keyof typeof QWEN3_SHAPES, quant, seed: 1 });
  }
  log.info("synthetic model written", {
    path,
    seconds: ((performance.now() - started) / 1000).toFixed(1),
  });
  return path;
}
