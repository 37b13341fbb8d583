/**
 * A native model's life: /models describes it (quantization, context, memory,
 * capabilities), an unload while a request streams ends that request cleanly, and unload
 * gives the memory back (RSS returns near where it was before the load).
 */
import { assert, assertEquals } from "../support/assert.ts";
import { eventually, jsonOf, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, parseSse, streamEnd, v1 } from "./support.ts";

type Json = Record<string, unknown>;
const MIB = 1024 * 1024;

async function settledRss(): Promise<number> {
  // Let terminated workers and freed buffers go before reading.
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 100));
    (globalThis as { gc?: () => void }).gc?.();
  }
  return Deno.memoryUsage().rss;
}

Deno.test("native: /models describes the model; unload mid-stream; memory comes back", async () => {
  await withNode(nativeNode(), async (node) => {
    // A first load pays once-per-process costs (the engine's code, native libraries, thread
    // arenas) that stay after its unload; what must come back is what each load adds.
    const warm = await loadFixture(node, "qwen3-small-q4_k_m.gguf");
    const warmUnload = await node.post("/models/unload", { model_id: warm });
    assertEquals(warmUnload.status, 200);
    await warmUnload.body?.cancel();
    const before = await settledRss();
    const model = await loadFixture(node, "qwen3-small-q4_k_m.gguf");
    const list = await jsonOf(await node.get("/models")) as Json[];
    assertEquals(list.length, 1);
    const m = list[0];
    assertEquals([m.id, m.harness, m.status], [model, "native", "loaded"]);
    assertEquals([m.devices, m.vram_used_mb], [[], null]);
    assertEquals(m.quantization, "Q4_K_M");
    assertEquals(m.limit, { context: 1024, output: 1024 });
    assertEquals([m.tool_call, m.reasoning, m.capabilities], [true, true, ["text"]]);
    assert((m.memory_bytes as number) > 40 * MIB, `memory_bytes ${m.memory_bytes}`);
    const endpoint = await jsonOf(
      await node.get(`/models/${encodeURIComponent(model)}/endpoint`),
    ) as Json;
    assertEquals(endpoint.url, `http://localhost:${node.port}`);

    const res = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 900,
      stream: true,
    });
    assertEquals(res.status, 200);
    const reader = res.body!.getReader();
    let text = "";
    // Some tokens first, so the usage has some to count.
    while (!text.includes('"content"')) {
      text += new TextDecoder().decode((await reader.read()).value);
    }
    const loaded = Deno.memoryUsage().rss;
    const unload = await node.post("/models/unload", { model_id: model });
    assertEquals(unload.status, 200);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    // Cut by the unload, the stream still ends with its finish and the usage so far.
    const end = streamEnd(parseSse(text).frames);
    assertEquals([end.fault?.code, end.finishReason], ["model_unloaded", "cancelled"]);
    const contentChunks = text.split('"content"').length - 1;
    assert(
      end.usage.completion_tokens >= contentChunks,
      `usage ${JSON.stringify(end.usage)} for ${contentChunks} content chunks`,
    );
    assertEquals(end.usage.total_tokens, end.usage.prompt_tokens + end.usage.completion_tokens);

    assertEquals(await jsonOf(await node.get("/models")), []);
    const gone = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "x" }],
    });
    assertEquals(gone.status, 404);
    await gone.body?.cancel();

    const after = await eventually(
      async () => {
        const rss = await settledRss();
        return rss - before < (loaded - before) * 0.5 ? rss : undefined;
      },
      3000,
      "RSS back near its level before the load",
    );
    console.log(
      `unload: RSS ${(before / MIB).toFixed(0)} MiB before load, ${
        (loaded / MIB).toFixed(0)
      } MiB loaded, ` +
        `${(after / MIB).toFixed(0)} MiB after unload`,
    );
  });
});
