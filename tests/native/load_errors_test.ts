/**
 * Loads that cannot work say so at load, with the status that fits: absurd
 * hyperparameters name their key (no model is left to fail every request), a path inside
 * model_dirs that is missing is 404, one that is a directory 400, and a CUDA device that
 * is not there is cuda_unavailable, the loader's reason said once.
 */

import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { fixture } from "../fixtures.ts";
import { nativeNode } from "./support.ts";
import { type GgufKv, GgufValueType, Kv } from "../../src/gguf/mod.ts";

type Json = Record<string, unknown>;

/** tokenizer.ggml.* with `extra` more tokens than the model has embeddings for. */
function moreTokens(kv: Map<string, GgufKv>, extra: number): void {
  const tokens = kv.get("tokenizer.ggml.tokens")!.value as string[];
  const added = Array.from({ length: extra }, (_, i) => `<extra_${i}>`);
  kv.set("tokenizer.ggml.tokens", Kv.strings([...tokens, ...added]));
  const types = kv.get("tokenizer.ggml.token_type");
  if (types) {
    const old = Array.from(types.value as Int32Array);
    kv.set(
      "tokenizer.ggml.token_type",
      Kv.array(GgufValueType.INT32, [...old, ...added.map(() => 1)]),
    );
  }
}

Deno.test("load: absurd hyperparameters are refused naming the key; nothing stays loaded", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cases: Array<[string, (kv: Map<string, GgufKv>) => void, string]> = [
      [
        "eps",
        (kv) => kv.set("qwen3.attention.layer_norm_rms_epsilon", Kv.f32(-1e-6)),
        "qwen3.attention.layer_norm_rms_epsilon",
      ],
      ["rope", (kv) => kv.set("qwen3.rope.freq_base", Kv.f32(NaN)), "qwen3.rope.freq_base"],
      [
        "heads",
        (kv) => kv.set("qwen3.attention.head_count", Kv.u32(0)),
        "qwen3.attention.head_count",
      ],
      ["vocab", (kv) => moreTokens(kv, 8), "tokenizer.ggml.tokens"],
      [
        "rope scaling",
        (kv) => kv.set("qwen3.rope.scaling.type", Kv.string("longrope")),
        "qwen3.rope.scaling.type 'longrope' is not supported",
      ],
    ];
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      for (const [name, edit, key] of cases) {
        const path = writeVariant(fixture("qwen3-tiny-q8_0.gguf"), `${dir}/${name}.gguf`, edit);
        const res = await node.post("/models/load", { model_id: path, harness: "native" });
        const body = await jsonOf(res) as Json;
        assertEquals([res.status, body.code], [500, "model_load_failed"], name);
        assertStringIncludes(String(body.error), key);
        const chat = await node.post("/v1/chat/completions", {
          model: path,
          messages: [{ role: "user", content: "Hi" }],
        });
        assertEquals(chat.status, 404, `${name}: no model serves (and fails) requests`);
        await chat.body?.cancel();
      }
      const models = await jsonOf(await node.get("/models")) as Json[];
      assertEquals(models.map((m) => m.status), Array(cases.length).fill("failed"));
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("load: inside model_dirs, missing is 404 and a directory is 400; outside stays 403", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/x.gguf`);
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      const cases: Array<[string, number, string]> = [
        [`${dir}/missing.gguf`, 404, "model_file_not_found"],
        [`${dir}/x.gguf`, 400, "model_file_invalid"],
        [`${dir}/../elsewhere/missing.gguf`, 403, "path_not_allowed"],
      ];
      for (const [path, status, code] of cases) {
        const res = await node.post("/models/load", { model_id: path, harness: "native" });
        const body = await jsonOf(res) as Json;
        assertEquals([res.status, body.code], [status, code], path);
      }
      assertEquals(await jsonOf(await node.get("/models")), [], "request errors leave nothing");
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("load: device cuda without CUDA is cuda_unavailable, the reason said once", async () => {
  await withNode(nativeNode({ extra: { device: "cuda" } }), async (node) => {
    const path = fixture("qwen3-tiny-q8_0.gguf");
    const res = await node.post("/models/load", { model_id: path, harness: "native" });
    const body = await jsonOf(res) as Json;
    assertEquals([res.status, body.code], [503, "cuda_unavailable"]);
    const message = String(body.error);
    assertEquals(message.split(path).length - 1, 1, `the path once: ${message}`);
    assertEquals(message.split("CUDA is unavailable").length - 1, 1, message);
    assert(!/Could not open library: Could not open library/.test(message), message);
  });
});

Deno.test("load: an architecture no family reads is 400 unsupported_architecture, naming those that are", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = writeVariant(
      fixture("qwen3-tiny-q8_0.gguf"),
      `${dir}/bert.gguf`,
      (kv) => kv.set("general.architecture", Kv.string("bert")),
    );
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      const res = await node.post("/models/load", { model_id: path, harness: "native" });
      const body = await jsonOf(res) as Json;
      assertEquals([res.status, body.code], [400, "unsupported_architecture"]);
      assertStringIncludes(String(body.error), "'bert'");
      for (const arch of ["qwen3", "qwen2", "llama", "gemma3"]) {
        assertStringIncludes(String(body.error), arch);
      }
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
