import { HarnessError } from "./errors.ts";

/**
 * The rule that keeps clients from making the node open arbitrary files: an absolute
 * `model_id` must be a `.gguf` inside one of the configured `model_dirs`, checked after
 * resolving symlinks and `..`. Returns the resolved path, or null for non-path ids
 * (hub repos, `scheme:org/name`).
 */
export async function allowedModelPath(modelId: string, modelDirs: string[]): Promise<
  string | null
> {
  if (!modelId.startsWith("/")) return null;
  const denied = (why: string) => new HarnessError("path_not_allowed", `${modelId}: ${why}`);
  if (!modelId.toLowerCase().endsWith(".gguf")) throw denied("only .gguf files can be loaded");
  if (modelDirs.length === 0) {
    throw denied("loading by path is disabled (no model_dirs configured)");
  }
  let real: string;
  try {
    real = await Deno.realPath(modelId);
  } catch {
    throw denied("not inside a configured model_dirs directory");
  }
  for (const dir of modelDirs) {
    let root: string;
    try {
      root = await Deno.realPath(dir);
    } catch {
      continue;
    }
    if (real.startsWith(root.endsWith("/") ? root : root + "/")) return real;
  }
  throw denied("not inside a configured model_dirs directory");
}
