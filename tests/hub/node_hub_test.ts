/**
 * Hub models through the node: `scheme:org/name` from a configured source, progress in
 * /models while downloading, the cached file used again, clear 4xx answers for requests
 * that name nothing loadable, and default models that wait out a hub that is not up yet.
 */
import { fixture } from "../fixtures.ts";
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { freePort } from "../support/free_port.ts";
import { eventually, jsonOf, withNode } from "../support/node.ts";
import { TEST_DEVICE } from "../native/support.ts";
import { type HubRepo, startFakeHub } from "./fake_hub.ts";

type Json = Record<string, unknown>;

const Q8 = Deno.readFileSync(fixture("qwen3-tiny-q8_0.gguf"));
const REPO: HubRepo = {
  id: "test-org/Tiny-GGUF",
  commit: "89abcdef0123456789abcdef0123456789abcdef",
  files: [
    { name: "README.md", bytes: new TextEncoder().encode("# tiny\n"), lfs: false },
    { name: "qwen3-tiny-Q8_0.gguf", bytes: Q8, lfs: true },
  ],
};
const MODEL = "local:test-org/Tiny-GGUF";

function config(endpoint: string, cacheDir: string, extra: Json = {}, native: Json = {}): Json {
  return {
    harness: {
      native: {
        device: TEST_DEVICE,
        context_length: 512,
        sources: { local: { endpoint, cache_dir: cacheDir } },
        ...native,
      },
    },
    ...extra,
  };
}

Deno.test("node + hub: load from a source with progress, then serve; errors name the files", async () => {
  const hub = startFakeHub([REPO]);
  hub.throttle(1 << 20, 40);
  const cacheDir = await Deno.makeTempDir({ prefix: "neuron-hub-" });
  try {
    await withNode(config(hub.url, cacheDir), async (node) => {
      const expect = async (body: Json, status: number, code: string, ...parts: string[]) => {
        const res = await node.post("/models/load", { harness: "native", ...body });
        const b = await jsonOf(res) as Json;
        assertEquals([res.status, b.code], [status, code], JSON.stringify(b));
        for (const part of parts) assertStringIncludes(String(b.error), part);
      };
      await expect(
        { model_id: "local:test-org/Other-GGUF" },
        404,
        "repo_not_found",
        "test-org/Other-GGUF",
      );
      await expect(
        { model_id: "local:test-org/Tiny-GGUF", quant: "q4_k_m" },
        404,
        "quant_not_found",
        "qwen3-tiny-Q8_0.gguf",
      );
      await expect({ model_id: "nowhere:a/b" }, 400, "unknown_source", "local");
      await expect({ model_id: "not a repo" }, 400, "invalid_model_id");
      const loading = node.post("/models/load", {
        model_id: MODEL,
        harness: "native",
        quant: "Q8_0",
      });
      const seen = await eventually(
        async () => {
          const list = await jsonOf(await node.get("/models")) as Json[];
          const m = list.find((m) => m.id === MODEL);
          const p = m?.load_progress as Json | undefined;
          return m?.status === "loading" && p?.stage === "downloading" &&
              (p.downloaded_bytes as number) > 0
            ? m
            : undefined;
        },
        10_000,
        "a download in progress",
      );
      const p = seen.load_progress as Json;
      assertEquals(p.total_bytes, Q8.length);
      assertEquals(p.file, "qwen3-tiny-Q8_0.gguf");
      assert((seen.progress as number) > 0 && (seen.progress as number) < 1, "progress is 0..1");
      assert(typeof p.bytes_per_sec === "number", "rate");
      // A request for it now is told to come back, not that the model does not exist.
      const early = await node.post("/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "Hello!" }],
      });
      const earlyBody = await jsonOf(early) as { error: Json };
      assertEquals([early.status, earlyBody.error.code], [503, "model_loading"]);
      assert(Number(early.headers.get("retry-after")) > 0, "Retry-After");
      assertEquals((await loading).status, 200);

      const m = (await jsonOf(await node.get("/models")) as Json[]).find((m) => m.id === MODEL)!;
      assertEquals([m.status, m.quantization], ["loaded", "Q8_0"]);
      const chat = await node.post("/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "Hello!" }],
        max_tokens: 4,
      });
      assertEquals(chat.status, 200);
      assertEquals(((await jsonOf(chat) as Json).usage as Json).completion_tokens, 4);
      // Refusals left nothing behind: only the loaded model is listed.
      assertEquals((await jsonOf(await node.get("/models")) as Json[]).map((m) => m.id), [MODEL]);
    });
    // The next node finds the file in the cache without downloading it again.
    await hub.stop();
    await withNode(config(hub.url, cacheDir), async (node) => {
      const res = await node.post("/models/load", {
        model_id: MODEL,
        harness: "native",
        quant: "q8_0",
      });
      assertEquals(res.status, 200, await res.clone().text());
      assert(node.logs.some((l) => l.includes("using the cached copy")), "served from the cache");
    });
  } finally {
    await hub.stop();
    await Deno.remove(cacheDir, { recursive: true });
  }
});

Deno.test("activation: a default model waits for the hub to come up, with retries", async () => {
  const port = freePort();
  const cacheDir = await Deno.makeTempDir({ prefix: "neuron-hub-" });
  let hub: ReturnType<typeof startFakeHub> | undefined;
  try {
    // No waiting inside one fetch: each attempt fails at once and activation retries.
    const raw = config(`http://127.0.0.1:${port}`, cacheDir, {
      default_models: [{ model_id: MODEL, harness: "native", quant: "q8_0" }],
    }, { hub_retry_secs: 0 });
    await withNode(raw, async (node) => {
      await eventually(
        () => node.logs.some((l) => l.includes("default model load failed; retrying")) || undefined,
        5_000,
        "a failed first attempt",
      );
      const first = (await jsonOf(await node.get("/health")) as Json).activation as Json;
      assertEquals([first.state, first.in_progress], ["pre_warming", MODEL]);
      assertEquals((first.progress as Json).stage, "waiting to retry");
      // Between attempts the model is still coming: retry later, not "does not exist".
      const early = await node.post("/v1/chat/completions", {
        model: MODEL,
        messages: [{ role: "user", content: "Hello!" }],
      });
      const body = await jsonOf(early) as { error: Json };
      assertEquals([early.status, body.error.code], [503, "model_loading"]);
      hub = startFakeHub([REPO], { port });
      await node.activated;
      const a = (await jsonOf(await node.get("/health")) as Json).activation as Json;
      assertEquals([a.state, a.completed, a.failed, a.progress], ["ready", [MODEL], [], null]);
      const h = await jsonOf(await node.get("/health")) as Json;
      assertEquals((h.models as Json[]).map((m) => m.id), [MODEL]);
    });
  } finally {
    await hub?.stop();
    await Deno.remove(cacheDir, { recursive: true });
  }
});
