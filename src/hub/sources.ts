import { resolveHubCache, resolveTokenPath, type SourceConfig } from "../config/mod.ts";
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

const TRUE_VALUES = new Set(["1", "ON", "YES", "TRUE"]);

/** huggingface_hub's reading: HF_HUB_OFFLINE, or when unset or empty TRANSFORMERS_OFFLINE. */
export function isOffline(env: Record<string, string>): boolean {
  const value = env.HF_HUB_OFFLINE || env.TRANSFORMERS_OFFLINE || "";
  return TRUE_VALUES.has(value.toUpperCase());
}

/** A token as huggingface_hub cleans one: trimmed, and none when empty. */
function clean(token: string | undefined): string | undefined {
  const t = token?.trim();
  return t ? t : undefined;
}

/** The hub's token: HF_TOKEN, HUGGING_FACE_HUB_TOKEN, else the file `hf auth login` writes. */
function hubToken(env: Record<string, string>): string | undefined {
  const fromEnv = clean(env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN);
  if (fromEnv) return fromEnv;
  try {
    return clean(Deno.readTextFileSync(resolveTokenPath(env)));
  } catch {
    return undefined;
  }
}

/**
 * The source a scheme names: a `[harness.native.sources.<scheme>]` block, or (no scheme,
 * or `hf` when not configured) the Hugging Face hub at `$HF_ENDPOINT` with its token.
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
    const token = configured.auth_env ? clean(env[configured.auth_env]) : undefined;
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
  const token = hubToken(env);
  return {
    scheme: "hf",
    endpoint: (env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, ""),
    cacheDir: hubCache,
    ...(token ? { token } : {}),
    offline,
  };
}
