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
      [`${allowed}/missing.gguf`, [allowed]],
      ["/etc/passwd", [allowed]],
      [`${allowed}x/a.gguf`, [allowed]],
    ] as const;
    for (const [path, dirs] of denied) {
      const err = await assertRejects(() => allowedModelPath(path, [...dirs]), HarnessError);
      assertEquals(err.code, "path_not_allowed", path);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
