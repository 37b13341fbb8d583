/**
 * Rope scaling as llama.cpp reads it from a GGUF (`<arch>.rope.scaling.*`) and hands it to
 * ggml's rope: none, linear (every position interpolated by 1/factor), or YaRN (the fast
 * pairs extrapolated, the slow ones interpolated, a ramp between, and cos and sin scaled
 * by 1 + 0.1 ln factor). Any other type is refused, naming the key.
 */

import type { RopeYarn } from "../backend/backend.ts";
import { type GgufFile, Kv } from "../gguf/mod.ts";
import { architecture, optionalNumber, optionalString } from "../gguf/metadata.ts";
import { ModelError } from "./errors.ts";
import type { ArchKeys } from "./arch_keys.ts";

export type RopeScalingType = "none" | "linear" | "yarn";

const TYPES: readonly string[] = ["none", "linear", "yarn"];

export interface RopeScaling {
  type: RopeScalingType;
  /** 1 / `rope.scaling.factor` as llama.cpp rounds it to f32 (1: no scaling). */
  freqScale: number;
  /** `rope.scaling.original_context_length`, else the context length: YaRN's ramp is set for it. */
  originalContext: number;
  /** `rope.scaling.attn_factor` (1 when absent): a magnitude on top of YaRN's. */
  attnFactor: number;
  /** llama.cpp's YaRN defaults for every family neuron reads (no file key changes them). */
  betaFast: number;
  betaSlow: number;
}

/** The scaling a file asks for; `contextLength` is its `<arch>.context_length`. */
export function readRopeScaling(keys: ArchKeys, contextLength: number): RopeScaling {
  const typeKey = keys.key("rope.scaling.type");
  const type = optionalString(keys.file, typeKey) ?? "linear";
  if (!TYPES.includes(type)) {
    throw new ModelError(
      "bad_hparams",
      `${typeKey} '${type}' is not supported (none, linear and yarn are)`,
    );
  }
  const factor = keys.numberOr("rope.scaling.factor", keys.numberOr("rope.scale_linear", 0));
  if (!(Number.isFinite(factor) && factor >= 0)) {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("rope.scaling.factor")} must be a positive number, got ${factor}`,
    );
  }
  return {
    type: type as RopeScalingType,
    freqScale: type === "none" || factor === 0 ? 1 : Math.fround(1 / Math.fround(factor)),
    originalContext: keys.countOr("rope.scaling.original_context_length", contextLength),
    attnFactor: keys.positiveOr("rope.scaling.attn_factor", 1),
    betaFast: 32,
    betaSlow: 1,
  };
}

const f = Math.fround;

/** logf, as f32. */
function logf(x: number): number {
  return f(Math.log(f(x)));
}

/**
 * ggml_rope_yarn_corr_dim: the pair whose wavelength fits `rotations` times into the
 * original context, in f32 as ggml computes it.
 */
function corrDim(dims: number, originalContext: number, rotations: number, base: number): number {
  const turns = f(f(f(rotations * 2) * f(Math.PI)));
  return f(f(dims * logf(f(originalContext / turns))) / f(2 * logf(base)));
}

/**
 * The rope's YaRN terms for heads of `dims` features rotated with `base`, as llama.cpp's
 * context computes them (llama-context.cpp: the attention factor, with the magnitude ggml
 * multiplies back in cancelled first; ggml.c: the correction dims); null for a plain
 * rotation.
 */
export function ropeYarn(s: RopeScaling, base: number, dims: number): RopeYarn | null {
  if (s.type !== "yarn") {
    return s.attnFactor === 1 ? null : { extFactor: 0, low: 0, high: 0, mscale: f(s.attnFactor) };
  }
  const factor = f(1 / s.freqScale);
  const magnitude = f(f(0.1) * logf(factor));
  let attn = factor <= 1 ? 1 : f(magnitude + 1);
  attn = f(attn * f(1 / f(1 + magnitude)));
  attn = f(attn * f(s.attnFactor));
  const low = Math.floor(corrDim(dims, s.originalContext, s.betaFast, base));
  const high = Math.ceil(corrDim(dims, s.originalContext, s.betaSlow, base));
  return {
    extFactor: 1,
    low: Math.max(0, low),
    high: Math.min(dims - 1, high),
    mscale: f(attn * f(1 + f(f(0.1) * logf(f(1 / s.freqScale))))),
  };
}

/**
 * Rope scaling asked for at load, for a file that does not carry it (Qwen3's own GGUFs
 * stop at 40960 positions; its model card turns YaRN on for 131072): llama.cpp's
 * `--rope-scaling`, `--rope-scale` and `--yarn-orig-ctx`.
 */
export interface RopeScalingConfig {
  type: "linear" | "yarn";
  factor: number;
  /** Default: the file's `rope.scaling.original_context_length`, else its context length. */
  originalContextLength?: number;
}

/**
 * Puts `config` in place of the file's own rope scaling, in its metadata, before a family
 * reads it (as llama.cpp's --override-kv would). Under YaRN the context the model serves
 * becomes the original one times the factor, as llama.cpp re-adjusts n_ctx_train.
 */
export function overrideRopeScaling(file: GgufFile, config: RopeScalingConfig): void {
  const arch = architecture(file);
  const key = (name: string): string => `${arch}.${name}`;
  if (!(Number.isFinite(config.factor) && config.factor >= 1)) {
    throw new ModelError(
      "bad_hparams",
      `rope scaling factor must be at least 1, got ${config.factor}`,
    );
  }
  const original = config.originalContextLength ??
    optionalNumber(file, key("rope.scaling.original_context_length")) ??
    optionalNumber(file, key("context_length"));
  file.kv.set(key("rope.scaling.type"), Kv.string(config.type));
  file.kv.set(key("rope.scaling.factor"), Kv.f32(config.factor));
  if (config.type === "yarn" && original !== undefined) {
    file.kv.set(key("rope.scaling.original_context_length"), Kv.u32(original));
    file.kv.set(key("context_length"), Kv.u32(Math.floor(original * config.factor)));
  }
}
