/**
 * The external harness against a real OpenAI-compatible process (tests/support/
 * fake_upstream.ts): byte-for-byte relaying, streaming without buffering, disconnects,
 * mistral.rs-style load/unload, systemd start/stop through a stand-in, unreachable upstreams.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { completionBody, streamFrames } from "../support/fake_upstream.ts";
import { eventually, jsonOf, withNode } from "../support/node.ts";
import { DENO, FAKE_SYSTEMCTL, FAKE_UPSTREAM, freePort, readEvents } from "../support/processes.ts";
import {
  chatBody,
  externalConfig,
  type Json,
  MODEL,
  sha256,
  withUpstream,
} from "./upstream_node.ts";

Deno.test("external: models come from the upstream; endpoint and capabilities by encoded id", async () => {
  await withUpstream({ models: [MODEL], unloaded: ["other/model"] }, async (_up, node) => {
    const models = await jsonOf(await node.get("/models")) as Json[];
    const byId = Object.fromEntries(models.map((m) => [m.id, m]));
    assertEquals(byId[MODEL], {
      id: MODEL,
      harness: "mistralrs",
      status: "loaded",
      devices: [],
      vram_used_mb: null,
      capabilities: ["text"],
      limit: { context: 4096 },
    });
    assertEquals(byId["other/model"].status, "unloaded");

    const ep = await node.get("/models/Qwen%2FQwen3-8B/endpoint");
    assertEquals(ep.status, 200);
    assertEquals(await jsonOf(ep), { url: `http://localhost:${node.port}` });
    const caps = await node.get("/models/Qwen%2FQwen3-8B/capabilities");
    assertEquals(await jsonOf(caps), { capabilities: ["text"] });
    // An unloaded model has no endpoint.
    const off = await node.get("/models/other%2Fmodel/endpoint");
    assertEquals(off.status, 404);
    await off.body?.cancel();

    const disc = await jsonOf(await node.get("/discovery")) as Json;
    assertEquals(disc.harnesses, ["native", "mistralrs"]);
    const health = await jsonOf(await node.get("/health")) as Json;
    assertEquals(health.models, [
      { id: MODEL, in_flight: 0, queue_depth: 0, tok_s_prefill: 0, tok_s_decode: 0 },
    ]);
    const v1 = await jsonOf(await node.get("/v1/models")) as { data: Json[] };
    assertEquals(v1.data.map((m) => m.id), [MODEL]);
  });
});

Deno.test("external: 409 already loaded; load and unload through mistral.rs routes", async () => {
  await withUpstream({ models: [MODEL], unloaded: ["other/model"] }, async (up, node) => {
    const again = await node.post("/models/load", { model_id: MODEL, harness: "mistralrs" });
    assertEquals(again.status, 409);
    assertStringIncludes(String((await jsonOf(again) as Json).error), "already loaded");

    // Concurrent loads of one id share one attempt.
    const loads = await Promise.all(
      Array.from(
        { length: 5 },
        () => node.post("/models/load", { model_id: "other/model", harness: "mistralrs" }),
      ),
    );
    for (const res of loads) assertEquals(await jsonOf(res), { status: "loaded" });
    assertEquals((await up.events()).filter((e) => e === "reload other/model").length, 1);
    const after = await jsonOf(await node.get("/models")) as Json[];
    assertEquals(after.find((m) => m.id === "other/model")?.status, "loaded");

    const un = await node.post("/models/unload", { model_id: "other/model" });
    assertEquals(await jsonOf(un), { status: "unloaded" });
    assert((await up.events()).includes("unload other/model"));
    const gone = await node.get("/models/other%2Fmodel/endpoint");
    assertEquals(gone.status, 404);
    await gone.body?.cancel();

    // A model the upstream does not know.
    const unknown = await node.post("/models/load", { model_id: "no/such", harness: "mistralrs" });
    assertEquals(unknown.status, 404);
    assertEquals((await jsonOf(unknown) as Json).code, "model_not_found");
  });
});

Deno.test("external: non-streaming answer and request relayed byte for byte", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    const body = chatBody(false);
    const headers = {
      "content-type": "application/json",
      "x-request-id": "chatcmpl-fixed",
      "x-test-header": "kept",
    };
    const direct = await fetch(`${up.url}/v1/chat/completions`, { method: "POST", headers, body });
    const directBytes = new Uint8Array(await direct.arrayBuffer());
    const via = await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers, body });
    const viaBytes = new Uint8Array(await via.arrayBuffer());
    assertEquals(via.status, 200);
    assertEquals(viaBytes, directBytes);
    assertEquals(new TextDecoder().decode(viaBytes), completionBody("chatcmpl-fixed", MODEL));
    assertEquals(via.headers.get("content-type"), "application/json");
    assertEquals(via.headers.get("x-fake-request-sha256"), await sha256(body));
    assertEquals(via.headers.get("x-fake-saw-header"), "kept");
  });
});

Deno.test("external: SSE relayed byte for byte and as it is produced", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    const n = 8;
    const headers = {
      "content-type": "application/json",
      "x-request-id": "chatcmpl-sse",
      "x-fake-delay-ms": "60",
    };
    const t0 = performance.now();
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: chatBody(true, n),
    });
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "text/event-stream");
    const reader = res.body!.getReader();
    const chunks: Uint8Array[] = [];
    let firstAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!firstAt) firstAt = performance.now() - t0;
      chunks.push(value);
    }
    const total = performance.now() - t0;
    const text = new TextDecoder().decode(
      new Uint8Array(chunks.flatMap((c) => [...c])),
    );
    const expected = streamFrames("chatcmpl-sse", MODEL, n).join("");
    assertEquals(text, expected);
    // 12 frames 60 ms apart: unbuffered, the first arrives long before the last.
    assert(chunks.length >= 6, `arrived in ${chunks.length} pieces`);
    assert(firstAt < total / 2, `first chunk at ${firstAt.toFixed(0)} ms of ${total.toFixed(0)}`);
    await up.events();
  });
});

Deno.test("external: a client disconnect reaches the upstream", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    const ctrl = new AbortController();
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-request-id": "chatcmpl-cut",
        "x-fake-delay-ms": "50",
      },
      body: chatBody(true, 200),
      signal: ctrl.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    // In flight while streaming.
    const during = await jsonOf(await node.get("/health")) as { models: Json[] };
    assertEquals(during.models[0].in_flight, 1);
    ctrl.abort();
    await reader.cancel().catch(() => {});
    const line = await eventually(
      async () => {
        return (await up.events()).find((e) => e.startsWith("disconnect chatcmpl-cut"));
      },
      5000,
      "the upstream to see the disconnect",
    );
    assert(!(await up.events()).includes("complete chatcmpl-cut"), line);
    await eventually(
      async () => {
        const h = await jsonOf(await node.get("/health")) as { models: Json[] };
        return h.models[0].in_flight === 0 ? true : undefined;
      },
      3000,
      "in_flight back to 0",
    );
  });
});

Deno.test("external: an unreachable upstream is a prompt 503, not a hang", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    await up.stop();
    const t0 = performance.now();
    const res = await node.post("/v1/chat/completions", chatBody(false));
    assertEquals(res.status, 503);
    assert(res.headers.get("retry-after") !== null, "Retry-After set");
    const err = (await jsonOf(res) as Json).error as Json;
    assertEquals(err.code, "harness_unavailable");
    assert(performance.now() - t0 < 3000, "answered promptly");
    // The models are no longer reported servable.
    const m = await eventually(
      async () => {
        const models = await jsonOf(await node.get("/models")) as Json[];
        return models.find((x) => x.status === "recovering");
      },
      5000,
      "models to be marked recovering",
    );
    assertEquals((m.servable as Json).ok, false);
  });
});

Deno.test("external: loading through a harness whose upstream never answers is a 503", async () => {
  const port = freePort();
  await withNode(
    externalConfig(`http://127.0.0.1:${port}`, { start_timeout_secs: 0.5 }),
    async (node) => {
      const t0 = performance.now();
      const res = await node.post("/models/load", { model_id: MODEL, harness: "mistralrs" });
      assertEquals(res.status, 503);
      assertEquals((await jsonOf(res) as Json).code, "harness_unavailable");
      assert(res.headers.get("retry-after") !== null);
      assert(performance.now() - t0 < 5000, "bounded by start_timeout_secs");
      const h = await jsonOf(await node.get("/health")) as { harnesses: Json[] };
      assertEquals(h.harnesses[1].state, "down");
    },
  );
});

Deno.test("external: the systemd unit is started with the node and stopped at shutdown", async () => {
  const state = await Deno.makeTempDir();
  const port = freePort();
  await Deno.writeTextFile(
    `${state}/unit.env`,
    `DENO=${DENO}\nFAKE_UPSTREAM=${FAKE_UPSTREAM}\nPORT=${port}\nMODELS=${MODEL}\n`,
  );
  try {
    const raw = {
      ...externalConfig(`http://127.0.0.1:${port}`, { systemd_unit: "fake-llm.service" }),
      systemd: { systemctl: `bash ${FAKE_SYSTEMCTL} ${state}` },
    };
    await withNode(raw, async (node) => {
      const m = await eventually(
        async () => {
          const models = await jsonOf(await node.get("/models")) as Json[];
          return models.find((x) => x.id === MODEL && x.status === "loaded");
        },
        15_000,
        "the unit's upstream to come up",
      );
      assertEquals(m.harness, "mistralrs");
      const res = await node.post("/v1/chat/completions", chatBody(false));
      assertEquals(res.status, 200);
      await res.body?.cancel();
    });
    const calls = (await Deno.readTextFile(`${state}/calls`)).trim().split("\n");
    assertEquals(calls, ["start fake-llm.service", "stop fake-llm.service"]);
    assert((await readEvents(`${state}/events`)).includes("sigterm"), "the upstream was stopped");
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});
