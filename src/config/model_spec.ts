import { z } from "zod";

/**
 * What the gateway sends to `POST /models/load` and what `[[default_models]]` entries hold
 * (WIRE.md). Lives with the config because both the file and the HTTP body use it.
 */
const fields = {
  model_id: z.string().min(1),
  harness: z.string().min(1),
  quant: z.string().min(1).nullish(),
  /** Hub models: branch, tag or commit (also `org/name@revision`); absent = main. */
  revision: z.string().min(1).max(255).nullish(),
  tensor_parallel: z.int().min(1).max(64).nullish(),
  devices: z.array(z.int().min(0)).min(1).nullish(),
  /** Another name requests may use for the model (llama-server's --alias). */
  served_name: z.string().min(1).max(256).regex(/^\S+$/, "no whitespace").nullish(),
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

/** The config file form: unknown keys are mistakes. */
export const modelSpecConfigSchema = z.strictObject(fields).superRefine(devicesMatchTp);

/** The HTTP form: fields a newer gateway adds are ignored, as the gateway ignores ours. */
export const modelSpecBodySchema = z.object(fields).superRefine(devicesMatchTp);

export type ModelSpec = z.infer<typeof modelSpecBodySchema>;
