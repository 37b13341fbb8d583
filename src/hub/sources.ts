import { resolveHubCache, type SourceConfig } from "../config/mod.ts";
import { HubError } from "./errors.ts";

/** Where one hub-compatible source lives and how to reach it. */
export interface HubSource {
  scheme: string;
  endpoint: string;
  cacheDir: string;
  /** Bearer token sent to this source's endpoint only. */
  token?: string;
  /** Cache only, no network (HF_HUB_OFFLINE). */
  offline: boolean;
}

export interface SourceSettings {
  hfCache?: string;
  sources: Record<string, SourceConfig>;
}

const TRUTHY = new Set(["1", "true", "yes", "on"]);

/** huggingface_hub's reading of HF_HUB_OFFLINE. */
export function isOffline(env: Record<string, string>): boolean {
  return TRUTHY.has((env.HF_HUB_OFFLINE ?? "").trim().toLowerCase());
}

/**
 * The source a scheme names: a `[harness.native.sources.<scheme>]` block, or (no scheme,
 * or `hf` when not configured) the Hugging Face hub at `$HF_ENDPOINT` with `$HF_TOKEN`.
 */
export function resolveSource(
  scheme: string | null,
  settings: SourceSettings,
  env: Record<string, string>,
): HubSource {
  const hubCache = resolveHubCache(settings.hfCache, env);
  const offline = isOffline(env);
  const configured = scheme !== null && Object.hasOwn(settings.sources, scheme)
    ? settings.sources[scheme]
    : null;
  if (configured) {
    const token = configured.auth_env ? env[configured.auth_env] : undefined;
    return {
      scheme: scheme!,
      endpoint: configured.endpoint.replace(/\/+$/, ""),
      cacheDir: configured.cache_dir ? resolveHubCache(configured.cache_dir, env) : hubCache,
      ...(token ? { token } : {}),
      offline,
    };
  }
  if (scheme !== null && scheme !== "hf") {
    const known = Object.keys(settings.sources);
    throw new HubError(
      "unknown_source",
      `no source '${scheme}' is configured` +
        (known.length
          ? ` (configured: ${known.join(", ")})`
          : " ([harness.native.sources] is empty)"),
    );
  }
  const token = env.HF_TOKEN ?? env.HUGGING_FACE_HUB_TOKEN;
  return {
    scheme: "hf",
    endpoint: (env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, ""),
    cacheDir: hubCache,
    ...(token ? { token } : {}),
    offline,
  };
}
