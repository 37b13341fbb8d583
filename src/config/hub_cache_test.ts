import { assertEquals } from "../../tests/support/assert.ts";
import { resolveHfHome, resolveHubCache, resolveTokenPath } from "./hub_cache.ts";

Deno.test("hub cache: harness setting, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, then HF_HOME/hub", () => {
  const env = {
    HOME: "/home/n",
    HF_HUB_CACHE: "/hub",
    HUGGINGFACE_HUB_CACHE: "/old",
    HF_HOME: "/hf",
  };
  assertEquals(resolveHubCache("~/models", env), "/home/n/models");
  assertEquals(resolveHubCache(undefined, env), "/hub");
  assertEquals(resolveHubCache(undefined, { ...env, HF_HUB_CACHE: "" }), "/old");
  assertEquals(resolveHubCache(undefined, { HOME: "/home/n", HF_HOME: "/hf/" }), "/hf/hub");
  assertEquals(resolveHubCache(undefined, { HOME: "/home/n" }), "/home/n/.cache/huggingface/hub");
  // As Python's expandvars: known variables expanded, unknown ones left as written.
  assertEquals(
    resolveHubCache(undefined, {
      HOME: "/h",
      HF_HUB_CACHE: "$DATA/hf/${KIND}/$NOPE",
      DATA: "/d",
      KIND: "x",
    }),
    "/d/hf/x/$NOPE",
  );
});

Deno.test("HF_HOME: set, else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface; the token file in it", () => {
  assertEquals(resolveHfHome({ HOME: "/h", HF_HOME: "~/hf", XDG_CACHE_HOME: "/x" }), "/h/hf");
  assertEquals(resolveHfHome({ HOME: "/h", XDG_CACHE_HOME: "/x/" }), "/x/huggingface");
  assertEquals(
    resolveHubCache(undefined, { HOME: "/h", XDG_CACHE_HOME: "/x" }),
    "/x/huggingface/hub",
  );
  assertEquals(resolveHfHome({ HOME: "/h" }), "/h/.cache/huggingface");
  assertEquals(resolveTokenPath({ HOME: "/h", XDG_CACHE_HOME: "/x" }), "/x/huggingface/token");
  assertEquals(resolveTokenPath({ HOME: "/h", HF_TOKEN_PATH: "~/t" }), "/h/t");
});
