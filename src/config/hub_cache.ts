/**
 * Where Hugging Face hub downloads live (WIRE.md): the harness's `hf_cache`, else
 * `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`. Same order as the
 * huggingface_hub library, so caches are shared with other tools.
 */
export function resolveHubCache(
  hfCache: string | undefined,
  env: Record<string, string> = Deno.env.toObject(),
): string {
  const home = env.HOME ?? "/root";
  const expand = (p: string): string => p === "~" || p.startsWith("~/") ? home + p.slice(1) : p;
  if (hfCache) return expand(hfCache);
  if (env.HF_HUB_CACHE) return expand(env.HF_HUB_CACHE);
  if (env.HF_HOME) return `${expand(env.HF_HOME).replace(/\/+$/, "")}/hub`;
  return `${home}/.cache/huggingface/hub`;
}
