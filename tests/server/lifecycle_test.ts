/**
 * Shutdown as systemd does it: SIGTERM (or SIGINT) stops new work, lets in-flight
 * requests finish within shutdown_grace_secs, cancels what is left, exits 0.
 */
import { assert, assertEquals } from "../support/assert.ts";
import {
  type NeuronProcess,
  startNeuron,
  startUpstream,
  type Upstream,
} from "../support/processes.ts";

async function configFile(endpoint: string, grace: number): Promise<string> {
  const file = await Deno.makeTempFile({ suffix: ".toml" });
  await Deno.writeTextFile(
    file,
    `host = "127.0.0.1"\nport = 0\nshutdown_grace_secs = ${grace}\n` +
      `[[harnesses]]\nname = "native"\n[[harnesses]]\nname = "up"\nendpoint = "${endpoint}"\n`,
  );
  return file;
}

async function waitForModel(node: NeuronProcess, id: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const models = await (await fetch(`${node.url}/models`)).json();
    if (models.some((m: { id: string }) => m.id === id)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`model ${id} never appeared`);
}

function stream(node: NeuronProcess, frames: number, delayMs: number, id: string) {
  return fetch(`${node.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-fake-delay-ms": String(delayMs),
      "x-request-id": id,
    },
    body: JSON.stringify({ model: "m", stream: true, max_tokens: frames, messages: [] }),
  });
}

async function readAll(res: Response): Promise<string> {
  let text = "";
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body!) text += decoder.decode(chunk, { stream: true });
  } catch {
    // a cut stream ends in an error; what arrived is what counts
  }
  return text;
}

/**
 * A child node fronting a fake upstream with one model `m`, shut down after `grace`
 * seconds of draining; everything is reaped whatever `fn` does.
 */
async function withChild(
  grace: number,
  fn: (node: NeuronProcess, up: Upstream) => Promise<void>,
): Promise<void> {
  const up = await startUpstream({ models: ["m"] });
  const file = await configFile(up.url, grace);
  const node = await startNeuron(["--config", file]);
  try {
    await waitForModel(node, "m");
    await fn(node, up);
  } finally {
    try {
      node.kill("SIGKILL");
    } catch {
      // exited
    }
    await node.exited;
    await up.stop();
    await Deno.remove(file);
  }
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test(`${signal}: an in-flight stream finishes, new requests are refused, exit 0`, async () => {
    await withChild(30, async (node) => {
      const res = await stream(node, 15, 40, "chatcmpl-drain");
      const body = readAll(res);
      await new Promise((r) => setTimeout(r, 100));
      const t0 = performance.now();
      node.kill(signal);
      const text = await body;
      assert(text.endsWith("data: [DONE]\n\n"), "the stream ran to its end");
      assertEquals(await node.exited, 0);
      assert(performance.now() - t0 < 10_000);
      const after = await fetch(`${node.url}/health`).then(() => "answered", () => "refused");
      assertEquals(after, "refused");
      const logs = node.stderr.map((l) => JSON.parse(l).msg);
      assert(logs.includes("shutting down") && logs.includes("stopped"), logs.join(","));
    });
  });
}

Deno.test("shutdown grace over: a long stream is cancelled, upstream told, exit 0", async () => {
  await withChild(0.5, async (node, up) => {
    const res = await stream(node, 500, 50, "chatcmpl-long");
    const body = readAll(res);
    await new Promise((r) => setTimeout(r, 150));
    const t0 = performance.now();
    node.kill("SIGTERM");
    assertEquals(await node.exited, 0);
    const took = performance.now() - t0;
    assert(took < 5000, `exited after ${took.toFixed(0)} ms`);
    const text = await body;
    assert(!text.includes("[DONE]"), "the stream was cut");
    for (let i = 0; i < 100; i++) {
      if ((await up.events()).some((e) => e.startsWith("disconnect chatcmpl-long"))) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert((await up.events()).some((e) => e.startsWith("disconnect chatcmpl-long")));
    const logs = node.stderr.map((l) => JSON.parse(l).msg);
    assert(logs.includes("grace period over: cancelling in-flight requests"), logs.join(","));
  });
});

Deno.test("two SIGINTs back to back (deno task's echo of Ctrl-C) drain once and exit 0", async () => {
  await withChild(30, async (node) => {
    const res = await stream(node, 15, 40, "chatcmpl-echo");
    const body = readAll(res);
    await new Promise((r) => setTimeout(r, 100));
    node.kill("SIGINT");
    node.kill("SIGINT");
    const text = await body;
    assert(text.endsWith("data: [DONE]\n\n"), "the stream ran to its end");
    assertEquals(await node.exited, 0);
    const logs = node.stderr.map((l) => JSON.parse(l).msg);
    assert(logs.includes("shutting down") && logs.includes("stopped"), logs.join(","));
    assert(!logs.includes("second signal: exiting without waiting"), logs.join(","));
  });
});

Deno.test("a deliberate second Ctrl-C while draining exits at once", async () => {
  await withChild(30, async (node) => {
    const res = await stream(node, 500, 50, "chatcmpl-impatient");
    const body = readAll(res);
    await new Promise((r) => setTimeout(r, 100));
    node.kill("SIGINT");
    const logged = (msg: string) => node.stderr.some((l) => JSON.parse(l).msg === msg);
    for (let i = 0; i < 200 && !logged("shutting down"); i++) {
      await new Promise((r) => setTimeout(r, 25));
    }
    assert(logged("shutting down"), "the first Ctrl-C started the drain");
    // Well past the window in which a repeat counts as the same Ctrl-C.
    await new Promise((r) => setTimeout(r, 1500));
    node.kill("SIGINT");
    assertEquals(await node.exited, 1);
    assert(logged("second signal: exiting without waiting"), node.stderr.join("\n"));
    assert(!(await body).includes("[DONE]"), "the stream was cut");
  });
});
