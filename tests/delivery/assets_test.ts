/**
 * The CPU kernel library as a compiled executable uses it: extracted from the embedded
 * file system to the cache directory, then dlopened. The embedded file system reads like
 * the checkout (same relative paths), so compiled mode is simulated by asking for the
 * extraction; `deno compile` itself is covered by compile_test.ts.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { extractAsset, nativeAssetPath, readAsset } from "../../src/common/assets.ts";

const CPU_LIBRARY = "kernels/build/libneuron_cpu.so";
const ASSETS = new URL("../../src/common/assets.ts", import.meta.url).href;

Deno.test("compiled mode: the extracted CPU kernel library dlopens and runs", () => {
  const cache = Deno.makeTempDirSync();
  try {
    const path = nativeAssetPath(CPU_LIBRARY, { compiled: true, cacheDir: cache });
    assert(path.startsWith(`${cache}/libneuron_cpu-`), path);
    const lib = Deno.dlopen(path, { nk_best_isa: { parameters: [], result: "i32" } });
    try {
      const isa = lib.symbols.nk_best_isa();
      assert(Number.isInteger(isa) && isa >= 0, `best ISA ${isa}`);
    } finally {
      lib.close();
    }
  } finally {
    Deno.removeSync(cache, { recursive: true });
  }
});

Deno.test("compiled mode: processes starting together extract one intact copy", async () => {
  const cache = Deno.makeTempDirSync();
  try {
    const script = `import { extractAsset } from "${ASSETS}";\n` +
      `console.log(extractAsset("${CPU_LIBRARY}", "${cache}/neuron"));`;
    const children = Array.from({ length: 4 }, () =>
      new Deno.Command(Deno.execPath(), {
        args: ["eval", script],
        stdout: "piped",
        stderr: "piped",
      }).output());
    const results = await Promise.all(children);
    const paths = results.map((r) => {
      assert(r.success, new TextDecoder().decode(r.stderr));
      return new TextDecoder().decode(r.stdout).trim();
    });
    assertEquals(new Set(paths).size, 1, paths.join("\n"));
    assertEquals(Deno.readFileSync(paths[0]), readAsset(CPU_LIBRARY));
    assertEquals([...Deno.readDirSync(`${cache}/neuron`)].length, 1, "no temporary files left");
    assertEquals(extractAsset(CPU_LIBRARY, `${cache}/neuron`), paths[0]);
  } finally {
    Deno.removeSync(cache, { recursive: true });
  }
});
