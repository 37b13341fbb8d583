/**
 * A bounded soak against a child node: rounds of 32 concurrent streaming chat completions,
 * 300 idle connections and 20 bad requests at once, on loopback. Every stream must end
 * properly (a usage chunk, then `[DONE]`), /health must still answer, every connection
 * must be closed again, and the node's resident memory must stay flat: its floor over the
 * last rounds (the lowest RSS seen after each) no more than 10% above its floor over the
 * rounds right after a warm-up round. A leak raises the floor; garbage not yet collected
 * only makes peaks.
 *
 * The work is fixed (rounds x tokens, the same requests every round), never a timed loop,
 * so a slow machine only takes longer. The child runs with V8's memory saver mode: V8
 * otherwise grows its heaps for a dozen rounds before they settle (300 MB to 400 MB here),
 * which is sizing, not a leak, and would hide one.
 */
import { fixture } from "../fixtures.ts";
import { parseSse, TEST_DEVICE } from "../native/support.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually } from "../support/node.ts";
import { type NeuronProcess, startNeuron } from "../support/processes.ts";
import { parsePrometheus } from "../support/prometheus.ts";

const STREAMS = 32;
const IDLE = 300;
const BAD = 20;
const MAX_TOKENS = 24;
/** Round 0 warms up; rounds 1-3 give the baseline, the last three the final value. */
const ROUNDS = 9;
const WINDOW = 3;

type Json = Record<string, unknown>;

/** No pooled keep-alive connections: at the end the node must have closed every one. */
const client = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

async function stream(node: NeuronProcess, model: string, i: number): Promise<void> {
  const res = await fetch(`${node.url}/v1/chat/completions`, {
    client,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: `Hello number ${i}!` }],
      max_tokens: MAX_TOKENS,
      temperature: 0.8,
      seed: i,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  assertEquals(res.status, 200);
  const { frames } = parseSse(await res.text());
  assertEquals(frames.at(-1)?.data, "[DONE]", `stream ${i} ends with [DONE]`);
  const usage = frames.at(-2)?.data as Json;
  assertEquals(usage.choices, [], `stream ${i}: a usage chunk before [DONE]`);
  assert(((usage.usage as Json).completion_tokens as number) > 0, JSON.stringify(usage));
}

/** Requests a client gets wrong, each answered (or dropped) without harm. */
function badRequests(node: NeuronProcess, model: string): Promise<void>[] {
  const post = (body: string) =>
    fetch(`${node.url}/v1/chat/completions`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
  const raw = async (bytes: string, answer: boolean): Promise<string> => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: node.port });
    await conn.write(new TextEncoder().encode(bytes));
    const buf = new Uint8Array(4096);
    const n = answer ? await conn.read(buf) : null;
    conn.close();
    return n === null ? "" : new TextDecoder().decode(buf.subarray(0, n));
  };
  const wrongType = JSON.stringify({ model, messages: [{ role: "user", content: "x" }], top_p: 2 });
  return Array.from({ length: BAD }, async (_, i) => {
    switch (i % 5) {
      case 0: {
        const r = await post("{not json");
        assertEquals([r.status, (await r.json()).error.code], [400, "malformed_json"]);
        break;
      }
      case 1: {
        const r = await post(wrongType);
        assertEquals([r.status, (await r.json()).error.param], [400, "top_p"]);
        break;
      }
      case 2: {
        const r = await post(JSON.stringify({ model: "no/such-model", messages: [] }));
        assertEquals([r.status, (await r.json()).error.code], [404, "model_not_found"]);
        break;
      }
      case 3:
        await raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le", false);
        break;
      default: {
        const text = await raw("NOT HTTP AT ALL\r\n\r\n", true);
        assert(text.startsWith("HTTP/1.1 400 "), text);
      }
    }
  });
}

async function round(node: NeuronProcess, model: string): Promise<void> {
  const idle = await Promise.all(
    Array.from({ length: IDLE }, () => Deno.connect({ hostname: "127.0.0.1", port: node.port })),
  );
  try {
    await Promise.all([
      ...Array.from({ length: STREAMS }, (_, i) => stream(node, model, i)),
      ...badRequests(node, model),
    ]);
  } finally {
    for (const c of idle) c.close();
  }
}

Deno.test(`soak: ${STREAMS} streams, ${IDLE} idle sockets, ${BAD} bad requests per round; memory flat`, async () => {
  const model = fixture("qwen3-tiny-q8_0.gguf");
  const file = await Deno.makeTempFile({ suffix: ".toml" });
  await Deno.writeTextFile(
    file,
    `host = "127.0.0.1"\nport = 0\n[harness.native]\ndevice = "${TEST_DEVICE}"\n` +
      `model_dirs = [${JSON.stringify(model.slice(0, model.lastIndexOf("/")))}]\n` +
      `context_length = 256\n[harness.native.admission]\nmax_in_flight = ${STREAMS}\n`,
  );
  const node = await startNeuron(["--config", file], { DENO_V8_FLAGS: "--memory-saver-mode" });
  try {
    const load = await fetch(`${node.url}/models/load`, {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_id: model, harness: "native" }),
    });
    assertEquals(load.status, 200, await load.text());

    const rss: number[] = [];
    const t0 = performance.now();
    for (let r = 0; r < ROUNDS; r++) {
      await round(node, model);
      rss.push(rssMiB(node.child.pid));
    }
    const baseline = Math.min(...rss.slice(1, 1 + WINDOW));
    const final = Math.min(...rss.slice(-WINDOW));
    const change = (final - baseline) / baseline;
    console.log(
      `soak: ${ROUNDS} rounds in ${((performance.now() - t0) / 1000).toFixed(1)} s; RSS MiB per ` +
        `round ${rss.map((v) => v.toFixed(0)).join(" ")}; ${(change * 100).toFixed(1)}%`,
    );
    // A leak grows; memory V8 hands back (the memory saver does) is no failure.
    assert(change <= 0.10, `RSS grew ${(change * 100).toFixed(1)}%`);

    const health = await fetch(`${node.url}/health`, { client });
    assertEquals(health.status, 200);
    const model0 = (await health.json()).models[0];
    assertEquals([model0.in_flight, model0.queue_depth], [0, 0]);
    // Every connection of the soak is closed again; only the scrape's own remains.
    await eventually(
      async () => {
        const text = await (await fetch(`${node.url}/metrics`, { client })).text();
        const open = parsePrometheus(text).get("neuron_http_connections")!.samples[0].value;
        return open === 1 || undefined;
      },
      10_000,
      "every soak connection closed",
    );
    assertEquals(node.stderr.find((l) => /Uncaught|panicked/.test(l)), undefined);
    node.kill("SIGTERM");
    assertEquals(await node.exited, 0);
  } finally {
    try {
      node.kill("SIGKILL");
    } catch {
      // exited
    }
    await node.exited;
    await Deno.remove(file);
    client.close();
  }
});
