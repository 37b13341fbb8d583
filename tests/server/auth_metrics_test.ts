/** Bearer auth on and off, and /metrics as a Prometheus scraper reads it. */
import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { parsePrometheus } from "../support/prometheus.ts";
import { startUpstream } from "../support/processes.ts";

type Json = Record<string, unknown>;

Deno.test("auth off: every route answers without a key", async () => {
  await withNode({}, async (node) => {
    for (const path of ["/health", "/models", "/discovery", "/version", "/metrics", "/v1/models"]) {
      const res = await node.get(path);
      assertEquals(res.status, 200, path);
      await res.body?.cancel();
    }
  });
});

Deno.test("auth on: 401 without the right key (flat on the control plane, OpenAI's envelope on /v1), /health stays open", async () => {
  await withNode({ api_key: "s3cret" }, async (node) => {
    const health = await node.get("/health");
    assertEquals(health.status, 200);
    await health.body?.cancel();
    for (
      const path of [
        "/models",
        "/discovery",
        "/version",
        "/metrics",
        "/v1/models",
        "/models/x/endpoint",
      ]
    ) {
      for (const auth of [undefined, "Bearer wrong", "Bearer s3cret-and-more", "Basic czNjcmV0"]) {
        const res = await node.get(path, { headers: auth ? { authorization: auth } : {} });
        assertEquals(res.status, 401, `${path} with ${auth}`);
        assertEquals(res.headers.get("www-authenticate"), 'Bearer realm="neuron"');
        const body = await jsonOf(res) as Json;
        if (path.startsWith("/v1/")) {
          const err = body.error as Json;
          assertEquals(err.code, "unauthorized");
          assertEquals(err.type, "authentication_error");
          assertEquals(err.param, null);
        } else {
          // WIRE.md: the gateway decodes control-plane errors as {"error": "<message>", "code"}.
          assertEquals(typeof body.error, "string", `${path}: ${JSON.stringify(body)}`);
          assertEquals(body.code, "unauthorized");
        }
      }
      const ok = await node.get(path, { headers: { authorization: "Bearer s3cret" } });
      assert(ok.status !== 401, `${path} with the key`);
      await ok.body?.cancel();
    }
    const load = await node.post("/models/load", { model_id: "a/b", harness: "native" });
    assertEquals(load.status, 401);
    assertEquals((await jsonOf(load) as Json).code, "unauthorized");
    const chat = await node.post("/v1/chat/completions", { model: "m", messages: [] });
    assertEquals(chat.status, 401);
    assertEquals(((await jsonOf(chat) as Json).error as Json).type, "authentication_error");
  });
});

Deno.test("auth on: the key is not forwarded to an external upstream", async () => {
  const up = await startUpstream({ models: ["m"] });
  try {
    const raw = {
      api_key: "s3cret",
      harnesses: [{ name: "native" }, { name: "ext", endpoint: up.url }],
    };
    await withNode(raw, async (node) => {
      const headers = { authorization: "Bearer s3cret" };
      for (let i = 0; i < 200; i++) {
        const models = await jsonOf(await node.get("/models", { headers })) as Json[];
        if (models.length) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      const res = await node.post("/v1/chat/completions", { model: "m", messages: [] }, {
        headers,
      });
      assertEquals(res.status, 200);
      assertEquals(res.headers.get("x-fake-saw-authorization"), "");
      await res.body?.cancel();
    });
  } finally {
    await up.stop();
  }
});

Deno.test("/metrics parses as Prometheus text and counts what happened", async () => {
  await withNode({}, async (node) => {
    for (let i = 0; i < 3; i++) await (await node.get("/health")).body?.cancel();
    await (await node.get("/models/a%2Fb/endpoint")).body?.cancel();
    await (await node.get("/nope")).body?.cancel();
    const res = await node.get("/metrics");
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    const families = parsePrometheus(await res.text());

    const requests = families.get("neuron_http_requests_total")!;
    assertEquals(requests.type, "counter");
    const count = (route: string, status: string) =>
      requests.samples.find((s) => s.labels.route === route && s.labels.status === status)?.value;
    assertEquals(count("/health", "200"), 3);
    // Routes are patterns, never raw ids (bounded label cardinality).
    assertEquals(count("/models/:id{.+}/endpoint", "404"), 1);
    assertEquals(count("unmatched", "404"), 1);

    const hist = families.get("neuron_http_request_duration_seconds")!;
    assertEquals(hist.type, "histogram");
    const healthCount = hist.samples.find((s) =>
      s.name.endsWith("_count") && s.labels.route === "/health"
    );
    assertEquals(healthCount?.value, 3);

    // The scrape itself is in flight while it renders, on one of the open connections.
    assertEquals(families.get("neuron_http_requests_in_flight")!.samples[0].value, 1);
    assert(families.get("neuron_http_connections")!.samples[0].value >= 1);
    assert(families.get("neuron_http_connections_max")!.samples[0].value >= 16);
    const rss = families.get("neuron_process_resident_memory_bytes")!.samples[0].value;
    assert(rss > 1e6, `rss ${rss}`);
    for (
      const name of [
        "neuron_model_in_flight",
        "neuron_model_queue_depth",
        "neuron_model_tokens_total",
        "neuron_gpu_memory_used_bytes",
        "neuron_process_heap_used_bytes",
        "neuron_build_info",
      ]
    ) {
      assert(families.has(name), name);
    }
  });
});

Deno.test("/metrics reports per-model gauges for a proxied model", async () => {
  const up = await startUpstream({ models: ["m/one"] });
  try {
    const raw = { harnesses: [{ name: "native" }, { name: "ext", endpoint: up.url }] };
    await withNode(raw, async (node) => {
      let families;
      for (let i = 0; i < 200; i++) {
        families = parsePrometheus(await (await node.get("/metrics")).text());
        if (families.get("neuron_model_in_flight")!.samples.length) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      const inflight = families!.get("neuron_model_in_flight")!.samples[0];
      assertEquals(inflight.labels, { model: "m/one", harness: "ext" });
      assertEquals(inflight.value, 0);
      const models = families!.get("neuron_models")!.samples;
      assertEquals(models, [{
        name: "neuron_models",
        labels: { harness: "ext", status: "loaded" },
        value: 1,
      }]);
    });
  } finally {
    await up.stop();
  }
});

Deno.test("listening beyond loopback without api_key: one warning at start", async () => {
  const warnings = async (raw: Record<string, unknown>) => {
    let logs: string[] = [];
    await withNode(raw, (node) => {
      logs = [...node.logs];
      return Promise.resolve();
    });
    return logs.map((l) => JSON.parse(l)).filter((r) =>
      r.level === "warn" && /api_key/.test(r.msg)
    );
  };
  const found = await warnings({ host: "0.0.0.0" });
  assertEquals(found.length, 1, JSON.stringify(found));
  assertEquals(found[0].host, "0.0.0.0");
  assertEquals(await warnings({ host: "0.0.0.0", api_key: "s3cret" }), []);
  for (const host of ["127.0.0.1", "localhost"]) assertEquals(await warnings({ host }), [], host);
});
