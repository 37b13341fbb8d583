/**
 * Bounded loopback load: 200 concurrent control-plane requests while a proxied SSE stream
 * runs through the same node. Every request must succeed, the stream must arrive intact,
 * and the latency percentiles are printed for the record.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { streamFrames } from "../support/fake_upstream.ts";
import { startNeuron, startUpstream } from "../support/processes.ts";

const MODEL = "Qwen/Qwen3-8B";
const CONCURRENT = 200;
const PATHS = [
  "/health",
  "/models",
  "/discovery",
  "/version",
  "/metrics",
  "/models/Qwen%2FQwen3-8B/endpoint",
  "/models/Qwen%2FQwen3-8B/capabilities",
  "/v1/models",
];

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

Deno.test("load: 200 concurrent control-plane requests during a proxied stream", async () => {
  const up = await startUpstream({ models: [MODEL] });
  const file = await Deno.makeTempFile({ suffix: ".toml" });
  await Deno.writeTextFile(
    file,
    `host = "127.0.0.1"\nport = 0\n[[harnesses]]\nname = "native"\n` +
      `[[harnesses]]\nname = "up"\nendpoint = "${up.url}"\n`,
  );
  const node = await startNeuron(["--config", file]);
  try {
    for (let i = 0; i < 200; i++) {
      const r = await fetch(`${node.url}/models/Qwen%2FQwen3-8B/endpoint`);
      await r.body?.cancel();
      if (r.status === 200) break;
      await new Promise((res) => setTimeout(res, 25));
    }
    const frames = 40;
    const streamed = fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-request-id": "chatcmpl-load",
        "x-fake-delay-ms": "25",
      },
      body: JSON.stringify({ model: MODEL, stream: true, max_tokens: frames, messages: [] }),
    }).then((r) => r.text());
    await new Promise((r) => setTimeout(r, 50));

    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, async (_, i) => {
        const start = performance.now();
        const res = await fetch(node.url + PATHS[i % PATHS.length]);
        await res.arrayBuffer();
        return { status: res.status, ms: performance.now() - start };
      }),
    );
    const wall = performance.now() - t0;
    const failures = results.filter((r) => r.status !== 200);
    assertEquals(failures.length, 0, `non-200 answers: ${JSON.stringify(failures.slice(0, 3))}`);
    const ms = results.map((r) => r.ms).sort((a, b) => a - b);
    const p50 = percentile(ms, 50);
    const p99 = percentile(ms, 99);
    console.log(
      `load: ${CONCURRENT} concurrent control-plane requests in ${wall.toFixed(0)} ms; ` +
        `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${ms.at(-1)!.toFixed(1)} ms`,
    );
    assert(p99 < 5000, `p99 ${p99.toFixed(0)} ms`);

    assertEquals(await streamed, streamFrames("chatcmpl-load", MODEL, frames).join(""));
  } finally {
    node.kill("SIGTERM");
    assertEquals(await node.exited, 0);
    await up.stop();
    await Deno.remove(file);
  }
});
