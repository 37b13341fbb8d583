import { assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { HubError } from "./errors.ts";
import { parseRepoRef } from "./model_ref.ts";
import { selectGguf } from "./select.ts";
import { resolveSource } from "./sources.ts";

const FILES = ["README.md", "Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q8_0.gguf", "Qwen3-8B-q4_k_s.gguf"];

Deno.test("select: the first .gguf containing the quant, case-insensitively", () => {
  assertEquals(selectGguf("r", FILES, "q4_k_m"), "Qwen3-8B-Q4_K_M.gguf");
  assertEquals(selectGguf("r", FILES, "Q4_K"), "Qwen3-8B-Q4_K_M.gguf");
  assertEquals(selectGguf("r", ["a.GGUF"], null), "a.GGUF");
  const code = (fn: () => unknown) => assertThrows(fn, HubError).code;
  assertEquals(code(() => selectGguf("r", FILES, "q2_k")), "quant_not_found");
  assertEquals(code(() => selectGguf("r", FILES, null)), "quant_required");
  assertEquals(code(() => selectGguf("r", ["README.md"], null)), "quant_not_found");
  assertEquals(
    code(() => selectGguf("r", ["m-Q8_0-00001-of-00002.gguf"], "q8_0")),
    "split_gguf_unsupported",
  );
});

Deno.test("model ids: org/name and scheme:org/name; anything else is refused", () => {
  assertEquals(parseRepoRef("Qwen/Qwen3-0.6B-GGUF"), {
    scheme: null,
    org: "Qwen",
    name: "Qwen3-0.6B-GGUF",
  });
  assertEquals(parseRepoRef("mirror:a/b"), { scheme: "mirror", org: "a", name: "b" });
  for (const bad of ["a", "a/b/c", "../x", "a/..", "a/.b", "A:b/c", "a/b c"]) {
    assertEquals(assertThrows(() => parseRepoRef(bad), HubError).code, "invalid_model_id", bad);
  }
});

Deno.test("sources: the hub from env, configured schemes with their own token and cache", () => {
  const env = { HOME: "/home/n", HF_TOKEN: "hf_x", MIRROR_TOKEN: "m_y", HF_HUB_OFFLINE: "1" };
  const settings = {
    sources: {
      mirror: { endpoint: "https://m.example/", cache_dir: "~/mirror", auth_env: "MIRROR_TOKEN" },
    },
  };
  assertEquals(resolveSource(null, settings, env), {
    scheme: "hf",
    endpoint: "https://huggingface.co",
    cacheDir: "/home/n/.cache/huggingface/hub",
    token: "hf_x",
    offline: true,
  });
  assertEquals(resolveSource("mirror", settings, { ...env, HF_HUB_OFFLINE: "" }), {
    scheme: "mirror",
    endpoint: "https://m.example",
    cacheDir: "/home/n/mirror",
    token: "m_y",
    offline: false,
  });
  assertEquals(resolveSource("hf", settings, { HF_ENDPOINT: "http://h:1" }).endpoint, "http://h:1");
  const err = assertThrows(() => resolveSource("other", settings, env), HubError);
  assertEquals(err.code, "unknown_source");
});
