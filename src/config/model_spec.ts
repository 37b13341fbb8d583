import { z } from "zod";
import { MAX_DRAFT_TOKENS, MAX_NGRAM, SPECULATIVE_MODES } from "../engine/mod.ts";

/**
 * The model's speculative decoding for requests that do not choose (their `speculative`
 * field overrides it field by field): `mode` ngram (prompt lookup) or off (the default);
 * `k` tokens drafted at most (6); `n` the longest n-gram matched (5); draft (a draft_model's
 * drafts). Native harness only.
 */
const speculative = z.strictObject({
  mode: z.enum(SPECULATIVE_MODES).optional(),
  k: z.int().min(0).max(MAX_DRAFT_TOKENS).optional(),
  n: z.int().min(1).max(MAX_NGRAM).optional(),
});

/**
 * What the gateway sends to `POST /models/load` and what `[[default_models]]` entries hold
 * (WIRE.md). Lives with the config because both the file and the HTTP body use it.
 */
/** KV cache element types a model may be loaded with. */
export const kvTypeSchema = z.enum(["f16", "q8_0", "q4_0"]);

const fields = {
  model_id: z.string().min(1),
  harness: z.string().min(1),
  quant: z.string().min(1).nullish(),
  /** Hub models: branch, tag or commit (also `org/name@revision`); absent = main. */
  revision: z.string().min(1).max(255).nullish(),
  tensor_parallel: z.int().min(1).max(64).nullish(),
  devices: z.array(z.int().min(0)).min(1).nullish(),
  /** The KV cache type for this model (absent: `[harness.native] kv_type`). */
  kv_type: kvTypeSchema.nullish(),
  /** Another name requests may use for the model (llama-server's --alias). */
  served_name: z.string().min(1).max(256).regex(/^\S+$/, "no whitespace").nullish(),
  speculative: speculative.nullish(),
  /**
   * A smaller model of the same vocabulary that drafts for `speculative` mode draft: a path
   * (in model_dirs) or a hub model (the load's quant chooses its file too). Native only.
   */
  draft_model: z.string().min(1).nullish(),
  /**
   * Rope scaling in place of the file's (llama.cpp's --rope-scaling, --rope-scale,
   * --yarn-orig-ctx): Qwen3's 131072 positions are YaRN, factor 4 over 32768.
   */
  rope_scaling: z.strictObject({
    type: z.enum(["linear", "yarn"]),
    factor: z.number().min(1).max(1024),
    original_context_length: z.int().min(1).optional(),
  }).nullish(),
};

function devicesMatchTp(
  spec: { tensor_parallel?: number | null; devices?: number[] | null },
  ctx: z.RefinementCtx,
): void {
  const tp = spec.tensor_parallel;
  if (tp && spec.devices && spec.devices.length !== tp) {
    ctx.addIssue({
      code: "custom",
      path: ["devices"],
      message: `must list exactly tensor_parallel (${tp}) devices, got ${spec.devices.length}`,
    });
  }
  if (spec.devices && new Set(spec.devices).size !== spec.devices.length) {
    ctx.addIssue({ code: "custom", path: ["devices"], message: "must not repeat a device" });
  }
}

function draftNeedsModel(
  spec: { speculative?: { mode?: string } | null; draft_model?: string | null },
  ctx: z.RefinementCtx,
): void {
  if (spec.speculative?.mode === "draft" && !spec.draft_model) {
    ctx.addIssue({
      code: "custom",
      path: ["speculative", "mode"],
      message: "draft needs a draft_model",
    });
  }
}

/** The config file form: unknown keys are mistakes. */
export const modelSpecConfigSchema = z.strictObject(fields).superRefine(devicesMatchTp)
  .superRefine(draftNeedsModel);

/** The HTTP form: fields a newer gateway adds are ignored, as the gateway ignores ours. */
export const modelSpecBodySchema = z.object(fields).superRefine(devicesMatchTp)
  .superRefine(draftNeedsModel);

export type ModelSpec = z.infer<typeof modelSpecBodySchema>;
