import { HarnessError } from "./errors.ts";

/**
 * The rule that keeps clients from making the node open arbitrary files: an absolute
 * `model_id` must be a `.gguf` inside one of the configured `model_dirs`, checked after
 * resolving symlinks and `..`. Returns the resolved path (the model's canonical id), or
 * null for non-path ids (hub repos, `scheme:org/name`).
 *
 * Only a path that lies inside a model directory as written is told apart further: missing
 * there is 404 `model_file_not_found`, not a file is 400 `model_file_invalid`. Anything
 * else is 403, whether it exists or not.
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
  const roots = await Promise.all(modelDirs.map(async (dir) => {
    try {
      return [normalize(dir), await Deno.realPath(dir)];
    } catch {
      return [normalize(dir)];
    }
  }));
  const inside = (path: string): boolean =>
    roots.flat().some((root) => path.startsWith(root.endsWith("/") ? root : root + "/"));
  let real: string;
  try {
    real = await Deno.realPath(modelId);
  } catch {
    if (!inside(normalize(modelId))) throw denied("not inside a configured model_dirs directory");
    throw new HarnessError("model_file_not_found", `${modelId}: no such file`);
  }
  if (!inside(real)) throw denied("not inside a configured model_dirs directory");
  if (!(await Deno.stat(real)).isFile) {
    throw new HarnessError("model_file_invalid", `${modelId}: not a file`);
  }
  return real;
}

/** `path` with `.`, `..` and repeated slashes resolved as written (no symlinks followed). */
function normalize(path: string): string {
  const parts: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return "/" + parts.join("/");
}
