/**
 * The control plane the gateway drives, field by field against WIRE.md, on a real server
 * bound to a free loopback port.
 */
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { jsonOf, withNode } from "../support/node.ts";

type Json = Record<string, unknown>;

function isInt(v: unknown): boolean {
  return typeof v === "number" && Number.isInteger(v);
}

Deno.test("/version: every field with its type", async () => {
  await withNode({}, async (node) => {
    const res = await node.get("/version");
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "application/json");
    const v = await jsonOf(res) as Json;
    const denoJson = JSON.parse(Deno.readTextFileSync(new URL("../../deno.json", import.meta.url)));
    assertEquals(v.package_version, denoJson.version);
    assertMatch(String(v.git_sha), /^([0-9a-f]{40}|unknown)$/);
    assertEquals(typeof v.git_dirty, "boolean");
    assert(!Number.isNaN(Date.parse(String(v.build_timestamp))), "build_timestamp is a date");
    assertEquals(v.target, Deno.build.target);
    assert(Array.isArray(v.features) && v.features.every((f) => typeof f === "string"));
    assertEquals(v.deno_version, Deno.version.deno);
  });
});

Deno.test("/discovery: host facts, no devices and no CUDA error on a CPU host", async () => {
  await withNode({ max_prompt_tokens: 16384 }, async (node) => {
    const d = await jsonOf(await node.get("/discovery")) as Json;
    assertEquals(d.hostname, Deno.hostname());
    assertEquals(d.os, "Linux");
    assertEquals(d.kernel, Deno.osRelease());
    assertEquals(d.cuda_version, null);
    assertEquals(d.driver_version, null);
    assertEquals(d.devices, []);
    assertEquals(d.harnesses, ["native"]);
    assert(!("cuda_unavailable_reason" in d), "no reason when CUDA is absent by design");
    assertEquals(d.max_prompt_tokens, 16384);
  });
});

/** A model directory holding one file that is not a GGUF: its load fails, deterministically. */
async function withBrokenModel(fn: (dir: string, path: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/broken.gguf`, "not a gguf file");
    await fn(dir, `${dir}/broken.gguf`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("/health: required fields; default-model failure is visible in activation", async () => {
  await withBrokenModel(async (dir, broken) => {
    const raw = {
      harness: { native: { model_dirs: [dir] } },
      default_models: [{ model_id: broken, harness: "native" }],
    };
    await withNode(raw, async (node) => {
      await node.activated;
      const h = await jsonOf(await node.get("/health")) as Json;
      assert(isInt(h.uptime_secs) && (h.uptime_secs as number) >= 0);
      assertEquals([h.hostname, h.os, h.kernel], [Deno.hostname(), "Linux", Deno.osRelease()]);
      assertEquals(h.devices, []);
      assertEquals(h.models, []);
      const a = h.activation as Json;
      assertEquals(a.state, "ready");
      assertEquals(a.pending, []);
      assertEquals(a.in_progress, null);
      assertEquals(a.completed, []);
      const failed = a.failed as Json[];
      assertEquals(failed.length, 1);
      assertEquals(failed[0].model_id, broken);
      assertStringIncludes(String(failed[0].error), `cannot load ${broken}`);
      const harnesses = h.harnesses as Json[];
      assertEquals(harnesses[0].name, "native");
      assertEquals(harnesses[0].kind, "native");
      assert(node.logs.some((l) => l.includes('"msg":"model load failed"')), "failure is logged");

      const models = await jsonOf(await node.get("/models")) as Json[];
      assert(Array.isArray(models), "/models is a bare array");
      assertEquals(models.length, 1);
      const m = models[0];
      assertEquals(m.id, broken);
      assertEquals(m.harness, "native");
      assertEquals(m.status, "failed");
      assertEquals(m.devices, []);
      assertEquals(m.vram_used_mb, null);
      assertEquals((m.servable as Json).ok, false);
    });
  });
});

Deno.test("/health while activation is pending reports pre_warming", async () => {
  await withBrokenModel(async (dir, broken) => {
    await Deno.copyFile(broken, `${dir}/two.gguf`);
    const raw = {
      harness: { native: { model_dirs: [dir] } },
      default_models: [
        { model_id: broken, harness: "native" },
        { model_id: `${dir}/two.gguf`, harness: "native" },
      ],
    };
    await withNode(raw, async (node) => {
      // Activation starts after the listener binds; the first poll sees it either running or
      // done, and its lists always add up to the configured models.
      const a = (await jsonOf(await node.get("/health")) as Json).activation as Json;
      const total = (a.pending as unknown[]).length + (a.completed as unknown[]).length +
        (a.failed as unknown[]).length + (a.in_progress ? 1 : 0);
      assertEquals(total, 2);
      assert(["pre_warming", "ready"].includes(String(a.state)));
      await node.activated;
      const after = (await jsonOf(await node.get("/health")) as Json).activation as Json;
      assertEquals(after.state, "ready");
      assertEquals((after.failed as Json[]).map((f) => f.model_id), [broken, `${dir}/two.gguf`]);
    });
  });
});

Deno.test("/models/load: native loads a model, candle is the same harness", async () => {
  const model = fixture("qwen3-tiny-q8_0.gguf");
  await withNode(
    { harness: { native: { model_dirs: [model.slice(0, model.lastIndexOf("/"))] } } },
    async (node) => {
      for (const harness of ["native", "candle"]) {
        const res = await node.post("/models/load", { model_id: model, harness });
        assertEquals(res.status, 200, await res.clone().text());
        assertEquals(await jsonOf(res), { status: "loaded" });
        const models = await jsonOf(await node.get("/models")) as Json[];
        assertEquals(models.map((m) => [m.id, m.harness, m.status]), [[model, "native", "loaded"]]);
        const again = await node.post("/models/load", { model_id: model, harness });
        assertEquals(again.status, 409);
        assertStringIncludes(String((await jsonOf(again) as Json).error), "already loaded");
        assertEquals((await node.post("/models/unload", { model_id: model })).status, 200);
      }
    },
  );
});

Deno.test("/models/load: request errors, each with its status and flat body", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await withNode(
      { max_body_bytes: 1024, harness: { native: { model_dirs: [dir] } } },
      async (node) => {
        const expect = async (res: Response, status: number, code: string) => {
          assertEquals(res.status, status, `${code}`);
          const body = await jsonOf(res) as Json;
          assertEquals(body.code, code);
          assertEquals(typeof body.error, "string");
        };
        await expect(
          await node.post("/models/load", { model_id: "a/b", harness: "vllm" }),
          400,
          "unknown_harness",
        );
        await expect(
          await node.post("/models/load", { model_id: "/etc/passwd.gguf", harness: "native" }),
          403,
          "path_not_allowed",
        );
        await expect(
          await node.post("/models/load", { model_id: `${dir}/../escape.gguf`, harness: "native" }),
          403,
          "path_not_allowed",
        );
        await expect(
          await node.post("/models/load", "model_id=a", {
            headers: { "content-type": "text/plain" },
          }),
          415,
          "unsupported_media_type",
        );
        await expect(await node.post("/models/load", "{not json"), 400, "malformed_json");
        await expect(
          await node.post("/models/load", { harness: "native" }),
          422,
          "invalid_request_body",
        );
        await expect(
          await node.post("/models/load", {
            model_id: "a/b",
            harness: "native",
            tensor_parallel: 2,
            devices: [0],
          }),
          422,
          "invalid_request_body",
        );
        await expect(await node.post("/models/load", [1, 2]), 422, "invalid_request_body");
        const big = JSON.stringify({ model_id: "x".repeat(2000), harness: "native" });
        await expect(await node.post("/models/load", big), 413, "payload_too_large");
        // No Content-Length (chunked): the cap still holds while reading.
        const chunked = new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(big));
            c.close();
          },
        });
        await expect(
          await fetch(node.url + "/models/load", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: chunked,
          }),
          413,
          "payload_too_large",
        );
        // None of these left a trace.
        assertEquals(await jsonOf(await node.get("/models")), []);
      },
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("/models/unload, endpoint, capabilities of unknown models: 404 flat", async () => {
  await withNode({}, async (node) => {
    const un = await node.post("/models/unload", { model_id: "Qwen/Qwen3-8B" });
    assertEquals(un.status, 404);
    assertEquals((await jsonOf(un) as Json).code, "model_not_found");
    const bad = await node.post("/models/unload", { id: "x" });
    assertEquals(bad.status, 422);
    await bad.body?.cancel();
    for (
      const path of ["/models/Qwen%2FQwen3-8B/endpoint", "/models/Qwen%2FQwen3-8B/capabilities"]
    ) {
      const res = await node.get(path);
      assertEquals(res.status, 404);
      const body = await jsonOf(res) as Json;
      assertEquals(body.code, "model_not_found");
      assertStringIncludes(String(body.error), "Qwen/Qwen3-8B");
    }
  });
});

Deno.test("unknown routes are 404, wrong methods 405 with Allow", async () => {
  await withNode({}, async (node) => {
    const nf = await node.get("/nope");
    assertEquals(nf.status, 404);
    assertEquals((await jsonOf(nf) as Json).code, "not_found");
    const nfv1 = await node.get("/v1/nope");
    assertEquals(nfv1.status, 404);
    const env = (await jsonOf(nfv1) as Json).error as Json;
    assertEquals(env.code, "not_found");
    assertEquals(env.type, "invalid_request_error");

    const wrong = await node.get("/models/load");
    assertEquals(wrong.status, 405);
    assertEquals(wrong.headers.get("allow"), "POST");
    assertEquals((await jsonOf(wrong) as Json).code, "method_not_allowed");
    const wrongHealth = await node.post("/health", {});
    assertEquals(wrongHealth.status, 405);
    assertEquals(wrongHealth.headers.get("allow"), "GET, HEAD");
    await wrongHealth.body?.cancel();
  });
});

Deno.test("/v1/*: OpenAI envelope for routing and body errors", async () => {
  await withNode({ max_request_bytes: 2048 }, async (node) => {
    const check = async (res: Response, status: number, code: string, param?: string) => {
      assertEquals(res.status, status, code);
      const body = await jsonOf(res) as Json;
      const err = body.error as Json;
      assertEquals(err.code, code);
      assertEquals(typeof err.message, "string");
      assertEquals(typeof err.type, "string");
      assert("param" in err, "param present");
      if (param) assertEquals(err.param, param);
    };
    const chat = (body: unknown, init?: RequestInit) =>
      node.post("/v1/chat/completions", body, init);
    await check(await chat({ model: "nope", messages: [] }), 404, "model_not_found");
    await check(await chat("{"), 400, "malformed_json");
    await check(await chat({ messages: [] }), 400, "invalid_request_body", "model");
    await check(
      await chat("x", { headers: { "content-type": "text/plain" } }),
      415,
      "unsupported_media_type",
    );
    await check(await chat({ model: "m", pad: "x".repeat(4096) }), 413, "payload_too_large");
    const list = await jsonOf(await node.get("/v1/models")) as Json;
    assertEquals(list, { object: "list", data: [] });
    await check(await node.get("/v1/models/nope"), 404, "model_not_found");
  });
});
