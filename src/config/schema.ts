import { z } from "zod";
import { kvTypeSchema, modelSpecConfigSchema } from "./model_spec.ts";

/**
 * The neuron.toml shape (WIRE.md "Config"). Every object is strict so a misspelt key is an
 * error rather than a silently ignored setting; every default here is documented in the
 * root neuron.toml.
 */

const MIB = 1024 * 1024;

/** Harness names that mean the in-process engine (`candle` is what fleet files say). */
export const NATIVE_NAMES: readonly string[] = ["native", "candle"];

export const sourceSchema = z.strictObject({
  endpoint: z.url(),
  cache_dir: z.string().min(1).optional(),
  auth_env: z.string().min(1).optional(),
});

export const admissionSchema = z.strictObject({
  max_in_flight: z.int().min(1).max(1024).default(8),
  max_queue_depth: z.int().min(0).default(64),
  max_wait_secs: z.number().positive().default(300),
});

/** `kv_budget_mb` becomes `kv_budget_bytes` here, the one place its unit changes. */
export const nativeSchema = z.strictObject({
  hf_cache: z.string().min(1).optional(),
  model_dirs: z.array(z.string().min(1)).default([]),
  threads: z.int().min(1).max(1024).optional(),
  mmap: z.boolean().default(true),
  // CPU: Q8_0, Q4_K and Q6_K matrices repacked at load so that batched decode and speculative
  // verification multiply several rows per pass over the weights at the prefill rate.
  repack: z.boolean().default(true),
  // `reference` is the pure-TypeScript backend: slow, for checking the others.
  device: z.enum(["auto", "cpu", "cuda", "reference"]).default("auto"),
  context_length: z.int().min(1).optional(),
  kv_budget_mb: z.int().min(1).optional(),
  // The KV cache's element type (llama.cpp's -ctk/-ctv): q8_0 halves what a long context
  // reads per token, q4_0 quarters it, both at some cost in accuracy.
  kv_type: kvTypeSchema.default("f16"),
  step_target_ms: z.int().min(1).max(60_000).default(150),
  sources: z.record(z.string().regex(/^[a-z][a-z0-9_-]*$/), sourceSchema).default({}),
  // Longest a model fetch waits in all for a busy hub (429 with its Retry-After, 5xx).
  hub_retry_secs: z.number().min(0).default(300),
  admission: admissionSchema.prefault({}),
}).transform(({ kv_budget_mb, ...rest }) => ({
  ...rest,
  kv_budget_bytes: kv_budget_mb === undefined ? undefined : kv_budget_mb * MIB,
}));

export const harnessEntrySchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, "letters, digits, '.', '_' or '-' only"),
  endpoint: z.url().optional(),
  systemd_unit: z.string().min(1).optional(),
  health_path: z.string().startsWith("/").default("/health"),
  start_timeout_secs: z.number().positive().default(120),
});

export const cudaSchema = z.strictObject({
  libcuda: z.string().min(1).default("libcuda.so.1"),
  libcublas: z.string().min(1).default("libcublas.so.13"),
  libnccl: z.string().min(1).default("libnccl.so.2"),
  libnvml: z.string().min(1).default("libnvidia-ml.so.1"),
});

/** `scheme://host[:port]`, as a browser sends it in `Origin`. */
const ORIGIN = /^https?:\/\/[^\s/?#]+$/i;

export const httpSchema = z.strictObject({
  header_timeout_secs: z.number().positive().default(10),
  idle_timeout_secs: z.number().positive().default(60),
  max_connections: z.int().min(1).optional(),
  cors_origins: z.array(
    z.string().refine((o) => o === "*" || ORIGIN.test(o), {
      message: 'expected "*" or an origin such as "https://app.example.com" (no path)',
    }),
  ).refine((list) => !list.includes("*") || list.length === 1, {
    message: '"*" allows every origin: list it alone',
  }).default([]),
});

export const systemdSchema = z.strictObject({
  systemctl: z.string().min(1).default("systemctl"),
});

const configFields = z.strictObject({
  port: z.int().min(0).max(65535).default(13131),
  host: z.string().min(1).default("0.0.0.0"),
  api_key: z.string().min(1).optional(),
  log_level: z.enum(["error", "warn", "info", "debug", "trace"]).default("info"),
  max_body_bytes: z.int().min(1024).default(MIB),
  max_request_bytes: z.int().min(1024).default(16 * MIB),
  shutdown_grace_secs: z.number().min(0).default(30),
  max_prompt_tokens: z.int().min(1).default(32768),
  harnesses: z.array(harnessEntrySchema).min(1).default([
    { name: "native", health_path: "/health", start_timeout_secs: 120 },
  ]),
  harness: z.strictObject({
    native: nativeSchema.optional(),
    candle: nativeSchema.optional(),
  }).default({}),
  http: httpSchema.prefault({}),
  cuda: cudaSchema.prefault({}),
  systemd: systemdSchema.prefault({}),
  default_models: z.array(modelSpecConfigSchema).default([]),
});

export const configSchema = configFields.superRefine(crossChecks);

/** Rules that span keys: harness names, external endpoints, default_models references. */
function crossChecks(cfg: z.output<typeof configFields>, ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  let natives = 0;
  cfg.harnesses.forEach((h, i) => {
    if (seen.has(h.name)) {
      ctx.addIssue({ code: "custom", path: ["harnesses", i, "name"], message: "duplicate name" });
    }
    seen.add(h.name);
    if (NATIVE_NAMES.includes(h.name)) {
      natives++;
      for (const key of ["endpoint", "systemd_unit"] as const) {
        if (h[key] !== undefined) {
          ctx.addIssue({
            code: "custom",
            path: ["harnesses", i, key],
            message: `not allowed on the native harness`,
          });
        }
      }
    } else if (h.endpoint === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["harnesses", i, "endpoint"],
        message: "required for an external harness",
      });
    }
  });
  if (natives > 1) {
    ctx.addIssue({
      code: "custom",
      path: ["harnesses"],
      message: "native and candle are the same harness; list one of them",
    });
  }
  for (const name of ["native", "candle"] as const) {
    if (cfg.harness[name] && !seen.has(name)) {
      ctx.addIssue({
        code: "custom",
        path: ["harness", name],
        message: `no [[harnesses]] entry named "${name}"`,
      });
    }
  }
  cfg.default_models.forEach((m, i) => {
    const known = seen.has(m.harness) ||
      (NATIVE_NAMES.includes(m.harness) && NATIVE_NAMES.some((n) => seen.has(n)));
    if (!known) {
      ctx.addIssue({
        code: "custom",
        path: ["default_models", i, "harness"],
        message: `no [[harnesses]] entry named "${m.harness}"`,
      });
    }
  });
}

export type Config = z.output<typeof configSchema>;
export type NativeConfig = z.output<typeof nativeSchema>;
export type HarnessEntry = z.output<typeof harnessEntrySchema>;
export type SourceConfig = z.output<typeof sourceSchema>;
export type CudaConfig = z.output<typeof cudaSchema>;
export type HttpConfig = z.output<typeof httpSchema>;

/** The native harness settings, whichever of `[harness.native]`/`[harness.candle]` holds them. */
export function nativeConfig(config: Config): NativeConfig {
  return config.harness.native ?? config.harness.candle ?? nativeSchema.parse({});
}
