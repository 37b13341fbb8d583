import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { HarnessError } from "./errors.ts";
import { allowedModelPath } from "./model_path.ts";

Deno.test("model paths: only .gguf files inside model_dirs, after resolving links", async () => {
  const root = await Deno.makeTempDir();
  try {
    const allowed = `${root}/models`;
    const outside = `${root}/outside`;
    await Deno.mkdir(allowed);
    await Deno.mkdir(outside);
    await Deno.writeTextFile(`${allowed}/a.gguf`, "");
    await Deno.writeTextFile(`${outside}/b.gguf`, "");
    await Deno.symlink(`${outside}/b.gguf`, `${allowed}/link.gguf`);

    assertEquals(await allowedModelPath("Qwen/Qwen3-8B", []), null);
    assertEquals(await allowedModelPath("mirror:org/name", [allowed]), null);
    assertEquals(await allowedModelPath(`${allowed}/a.gguf`, [allowed]), `${allowed}/a.gguf`);
    const denied = [
      [`${allowed}/a.gguf`, []],
      [`${allowed}/../outside/b.gguf`, [allowed]],
      [`${allowed}/link.gguf`, [allowed]],
      [`${allowed}/../outside/missing.gguf`, [allowed]],
      ["/etc/passwd", [allowed]],
      [`${allowed}x/a.gguf`, [allowed]],
    ] as const;
    for (const [path, dirs] of denied) {
      const err = await assertRejects(() => allowedModelPath(path, [...dirs]), HarnessError);
      assertEquals(err.code, "path_not_allowed", path);
    }
    // Two spellings of one file are one model: its real path.
    await Deno.mkdir(`${allowed}/sub`);
    assertEquals(
      await allowedModelPath(`${allowed}/./sub/../a.gguf`, [allowed]),
      `${allowed}/a.gguf`,
    );
    // Inside a model directory as written: missing is 404, a directory is 400.
    await Deno.mkdir(`${allowed}/dir.gguf`);
    const told = [
      [`${allowed}/missing.gguf`, "model_file_not_found"],
      [`${allowed}/nowhere/../missing.gguf`, "model_file_not_found"],
      [`${allowed}/dir.gguf`, "model_file_invalid"],
    ] as const;
    for (const [path, code] of told) {
      const err = await assertRejects(() => allowedModelPath(path, [allowed]), HarnessError);
      assertEquals(err.code, code, path);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
