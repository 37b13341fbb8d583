import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/support/assert.ts";
import { HubError } from "./errors.ts";
import { parseRepoRef } from "./model_ref.ts";
import { selectGguf } from "./select.ts";
import { isOffline, resolveSource } from "./sources.ts";

const FILES = ["README.md", "Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q8_0.gguf", "Qwen3-8B-q4_k_s.gguf"];
const pick = (files: string[], quant: string | null): string => selectGguf("r", files, quant).file;
const code = (fn: () => unknown): string => assertThrows(fn, HubError).code;

Deno.test("select: a .gguf containing the quant, case-insensitively, whole tokens first", () => {
  assertEquals(pick(FILES, "q4_k_m"), "Qwen3-8B-Q4_K_M.gguf");
  assertEquals(pick(FILES, "Q4_K"), "Qwen3-8B-Q4_K_M.gguf");
  assertEquals(pick(["a.GGUF"], null), "a.GGUF");
  // f16 is inside bf16, which sorts first: the file where it stands alone wins.
  assertEquals(pick(["m-BF16.gguf", "m-F16.gguf"], "f16"), "m-F16.gguf");
  assertEquals(pick(["m-BF16.gguf", "m-F16.gguf"], "bf16"), "m-BF16.gguf");
  assertEquals(code(() => pick(FILES, "q2_k")), "quant_not_found");
  assertEquals(code(() => pick(FILES, null)), "quant_required");
  assertEquals(code(() => pick(["README.md"], null)), "quant_not_found");
});

Deno.test("select: the choice depends on the names, not on the listing's order", () => {
  const files = ["b/m-Q4_K_S.gguf", "m-Q4_K_M.gguf", "a/m-Q4_K_L.gguf", "mmproj-Q4_K.gguf"];
  const expected = pick(files, "q4_k");
  for (let i = 0; i < files.length; i++) {
    const rotated = [...files.slice(i), ...files.slice(0, i)];
    for (const order of [rotated, rotated.toReversed()]) {
      assertEquals(pick(order, "q4_k"), expected, order.join(", "));
    }
  }
  assertEquals(expected, "a/m-Q4_K_L.gguf");
});

Deno.test("select: vision projectors and importance matrices are never the model", () => {
  const files = ["mmproj-Qwen2.5-VL-F16.gguf", "Qwen2.5-VL-Q8_0.gguf", "imatrix.gguf"];
  assertEquals(pick(files, null), "Qwen2.5-VL-Q8_0.gguf");
  assertEquals(pick(files, "q8_0"), "Qwen2.5-VL-Q8_0.gguf");
  assertEquals(pick(["m-F16.gguf", "mmproj-m-F16.gguf"], "f16"), "m-F16.gguf");
  const err = assertThrows(() => pick(files, "f16"), HubError);
  assertEquals(err.code, "quant_not_found");
  assertStringIncludes(err.message, "not models: mmproj-Qwen2.5-VL-F16.gguf, imatrix.gguf");
  assertEquals(code(() => pick(["mmproj-F16.gguf", "m.imatrix.gguf"], null)), "quant_not_found");
});

Deno.test("select: a split GGUF is chosen whole, its parts in order; an incomplete one is refused", () => {
  const parts = ["Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf"];
  const files = [...parts, "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf", "m-Q8_0.gguf"];
  assertEquals(selectGguf("r", files, "q4_k_m"), {
    file: "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
    parts: [
      "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
      "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
      "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf",
    ],
  });
  assertEquals(selectGguf("r", files, "q8_0"), { file: "m-Q8_0.gguf", parts: ["m-Q8_0.gguf"] });
  const err = assertThrows(() => selectGguf("r", [...parts, "m-Q8_0.gguf"], "q4_k_m"), HubError);
  assertEquals(err.code, "split_gguf_incomplete");
  assertStringIncludes(err.message, "lacks part(s) 2 of 3");
  // Another model's missing part does not stand in the way.
  assertEquals(pick([...parts, "m-Q8_0.gguf"], "q8_0"), "m-Q8_0.gguf");
});

Deno.test("model ids: org/name and scheme:org/name, with @revision; anything else is refused", () => {
  assertEquals(parseRepoRef("Qwen/Qwen3-0.6B-GGUF"), {
    scheme: null,
    org: "Qwen",
    name: "Qwen3-0.6B-GGUF",
  });
  assertEquals(parseRepoRef("mirror:a/b"), { scheme: "mirror", org: "a", name: "b" });
  assertEquals(parseRepoRef("a/b@v1.0").revision, "v1.0");
  assertEquals(parseRepoRef("m:a/b@refs/pr/1").revision, "refs/pr/1");
  assertEquals(parseRepoRef("a/b", "dev").revision, "dev");
  assertEquals(parseRepoRef("a/b@dev", "dev").revision, "dev");
  for (const bad of ["a", "a/b/c", "../x", "a/..", "a/.b", "A:b/c", "a/b c", "a/b@", "a/b@../x"]) {
    assertEquals(code(() => parseRepoRef(bad)), "invalid_model_id", bad);
  }
  for (const rev of ["refs/../x", "/abs", "a b", "x.lock", "a//b"]) {
    assertEquals(code(() => parseRepoRef("a/b", rev)), "invalid_model_id", rev);
  }
  assertEquals(code(() => parseRepoRef("a/b@v1", "v2")), "invalid_model_id");
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

Deno.test("sources: the token file of `hf auth login`, HF_TOKEN first; HUGGING_FACE_HUB_TOKEN", () => {
  const home = Deno.makeTempDirSync({ prefix: "neuron-hf-home-" });
  try {
    Deno.writeTextFileSync(`${home}/token`, "  hf_from_file\n");
    const env = { HOME: "/nowhere", HF_HOME: home };
    const token = (e: Record<string, string>) => resolveSource(null, { sources: {} }, e).token;
    assertEquals(token(env), "hf_from_file");
    assertEquals(token({ ...env, HF_TOKEN: "hf_env" }), "hf_env");
    assertEquals(token({ ...env, HF_TOKEN: "", HUGGING_FACE_HUB_TOKEN: "hf_old" }), "hf_old");
    assertEquals(token({ ...env, HF_TOKEN_PATH: `${home}/none` }), undefined);
    Deno.writeTextFileSync(`${home}/token`, "\n");
    assertEquals(token(env), undefined);
    // A configured source never gets the hub's token.
    const mirror = { sources: { m: { endpoint: "https://m.example" } } };
    assertEquals(resolveSource("m", mirror, { ...env, HF_TOKEN: "hf_env" }).token, undefined);
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test("offline: HF_HUB_OFFLINE, else TRANSFORMERS_OFFLINE, read as huggingface_hub reads them", () => {
  assertEquals(isOffline({ HF_HUB_OFFLINE: "1" }), true);
  assertEquals(isOffline({ HF_HUB_OFFLINE: "yes" }), true);
  assertEquals(isOffline({ TRANSFORMERS_OFFLINE: "ON" }), true);
  assertEquals(isOffline({ HF_HUB_OFFLINE: "", TRANSFORMERS_OFFLINE: "true" }), true);
  // HF_HUB_OFFLINE set (to anything) decides alone.
  assertEquals(isOffline({ HF_HUB_OFFLINE: "0", TRANSFORMERS_OFFLINE: "1" }), false);
  assertEquals(isOffline({ HF_HUB_OFFLINE: "2" }), false);
  assertEquals(isOffline({}), false);
});
