/**
 * Where Hugging Face files live, read from the environment as the huggingface_hub library
 * reads it, so caches and logins are shared with other tools:
 *   HF_HOME       $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
 *   hub cache     the harness's `hf_cache`, else $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE,
 *                 else $HF_HOME/hub
 *   token file    $HF_TOKEN_PATH, else $HF_HOME/token
 * `~` and `$VAR` / `${VAR}` in these are expanded (Python's expanduser and expandvars).
 */

type Env = Record<string, string>;

function expand(path: string, env: Env): string {
  const home = env.HOME ?? "/root";
  const user = path === "~" || path.startsWith("~/") ? home + path.slice(1) : path;
  // expandvars leaves unknown variables as they are.
  return user.replace(
    /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g,
    (whole, braced, bare) => env[braced ?? bare] ?? whole,
  );
}

function trimSlashes(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, "") : path;
}

export function resolveHfHome(env: Env = Deno.env.toObject()): string {
  if (env.HF_HOME) return trimSlashes(expand(env.HF_HOME, env));
  const xdg = env.XDG_CACHE_HOME
    ? expand(env.XDG_CACHE_HOME, env)
    : `${env.HOME ?? "/root"}/.cache`;
  return `${trimSlashes(xdg)}/huggingface`;
}

export function resolveHubCache(
  hfCache: string | undefined,
  env: Env = Deno.env.toObject(),
): string {
  const chosen = hfCache ?? (env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE);
  if (chosen) return trimSlashes(expand(chosen, env));
  return `${resolveHfHome(env)}/hub`;
}

export function resolveTokenPath(env: Env = Deno.env.toObject()): string {
  return env.HF_TOKEN_PATH ? expand(env.HF_TOKEN_PATH, env) : `${resolveHfHome(env)}/token`;
}
