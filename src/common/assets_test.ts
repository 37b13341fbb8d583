import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import {
  assetCacheDir,
  AssetError,
  assetPath,
  extractAsset,
  isCompiled,
  nativeAssetPath,
  readAsset,
} from "./assets.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert(err instanceof AssetError, `expected an AssetError, got ${err}`);
    return err.code;
  }
  throw new Error("expected an error");
}

Deno.test("assets resolve into the checkout under deno run", () => {
  assertEquals(isCompiled(), false);
  assertEquals(assetPath("deno.json"), `${ROOT}deno.json`);
  assertEquals(readAsset("deno.json"), Deno.readFileSync(`${ROOT}deno.json`));
  assertEquals(assetPath("src/common/assets.ts"), new URL("./assets.ts", import.meta.url).pathname);
});

Deno.test("asset paths must stay inside the checkout", () => {
  for (const bad of ["/etc/passwd", "../outside", "kernels/../../x", "a//b", "./deno.json", ""]) {
    assertEquals(code(() => readAsset(bad)), "asset_invalid_path", bad);
  }
});

Deno.test("a missing asset is a typed error naming it and how to build it", () => {
  const err = assertThrows(() => readAsset("kernels/build/no_such_asset.so"), AssetError);
  assertEquals(err.code, "asset_missing");
  assert(err.message.includes("kernels/build/no_such_asset.so"), err.message);
  assert(err.message.includes("deno task kernels:cpu"), err.message);
});

Deno.test("the cache dir is the StateDirectory, else XDG_CACHE_HOME/neuron, else ~/.cache", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const all = {
    STATE_DIRECTORY: "/var/lib/neuron:/var/lib/other",
    XDG_CACHE_HOME: "/c",
    HOME: "/h",
  };
  assertEquals(assetCacheDir(env(all)), "/var/lib/neuron");
  assertEquals(assetCacheDir(env({ XDG_CACHE_HOME: "/c", HOME: "/h" })), "/c/neuron");
  // XDG requires absolute paths: a relative one is ignored.
  assertEquals(assetCacheDir(env({ XDG_CACHE_HOME: "rel", HOME: "/h" })), "/h/.cache/neuron");
  assertEquals(code(() => assetCacheDir(env({}))), "asset_cache_unavailable");
});

Deno.test("under deno run a native asset is used in place, nothing is extracted", () => {
  const cache = Deno.makeTempDirSync();
  try {
    const path = nativeAssetPath("deno.json", { compiled: false, cacheDir: cache });
    assertEquals(path, `${ROOT}deno.json`);
    assertEquals([...Deno.readDirSync(cache)], []);
  } finally {
    Deno.removeSync(cache, { recursive: true });
  }
});

Deno.test("compiled: extracted once, keyed by hash, read-only, in a private directory", () => {
  const base = Deno.makeTempDirSync();
  const cache = `${base}/nested/neuron`;
  try {
    const path = nativeAssetPath("deno.json", { compiled: true, cacheDir: cache });
    assert(/\/deno-[0-9a-f]{16}\.json$/.test(path), path);
    assert(path.startsWith(`${cache}/`), path);
    assertEquals(Deno.readFileSync(path), readAsset("deno.json"));
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o500);
    assertEquals(Deno.statSync(cache).mode! & 0o777, 0o700);
    const first = Deno.statSync(path);
    assertEquals(nativeAssetPath("deno.json", { compiled: true, cacheDir: cache }), path);
    const second = Deno.statSync(path);
    assertEquals([second.ino, second.mtime], [first.ino, first.mtime], "reused, not rewritten");
    assertEquals([...Deno.readDirSync(cache)].map((e) => e.name), [path.split("/").pop()]);
  } finally {
    Deno.removeSync(base, { recursive: true });
  }
});

Deno.test("compiled: a tampered or stale copy is replaced, old versions are pruned", () => {
  const cache = Deno.makeTempDirSync();
  try {
    const path = extractAsset("deno.json", cache);
    Deno.chmodSync(path, 0o600);
    Deno.writeTextFileSync(path, "{}");
    const stale = `${cache}/deno-0123456789abcdef.json`;
    Deno.writeTextFileSync(stale, "old build");
    const unrelated = `${cache}/notes.txt`;
    Deno.writeTextFileSync(unrelated, "kept");
    assertEquals(extractAsset("deno.json", cache), path);
    assertEquals(Deno.readFileSync(path), readAsset("deno.json"));
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o500);
    const names = [...Deno.readDirSync(cache)].map((e) => e.name).sort();
    assertEquals(names, [path.split("/").pop()!, "notes.txt"].sort());
  } finally {
    Deno.removeSync(cache, { recursive: true });
  }
});

Deno.test("compiled: a cache directory others can write, or a symlink, is refused", () => {
  const base = Deno.makeTempDirSync();
  try {
    const open = `${base}/open`;
    Deno.mkdirSync(open);
    Deno.chmodSync(open, 0o777);
    const err = assertThrows(() => extractAsset("deno.json", open), AssetError);
    assertEquals(err.code, "asset_cache_unsafe");
    assert(err.message.includes("writable by others"), err.message);
    assertEquals([...Deno.readDirSync(open)], [], "nothing written there");

    Deno.mkdirSync(`${base}/real`, { mode: 0o700 });
    Deno.symlinkSync(`${base}/real`, `${base}/link`);
    assertEquals(code(() => extractAsset("deno.json", `${base}/link`)), "asset_cache_unsafe");
  } finally {
    Deno.removeSync(base, { recursive: true });
  }
});
