import { assertEquals } from "../../tests/support/assert.ts";
import { resolveHubCache } from "./hub_cache.ts";

Deno.test("hub cache: harness setting, then HF_HUB_CACHE, then HF_HOME/hub, then ~/.cache", () => {
  const env = { HOME: "/home/n", HF_HUB_CACHE: "/hub", HF_HOME: "/hf" };
  assertEquals(resolveHubCache("~/models", env), "/home/n/models");
  assertEquals(resolveHubCache(undefined, env), "/hub");
  assertEquals(resolveHubCache(undefined, { HOME: "/home/n", HF_HOME: "/hf/" }), "/hf/hub");
  assertEquals(resolveHubCache(undefined, { HOME: "/home/n" }), "/home/n/.cache/huggingface/hub");
});
