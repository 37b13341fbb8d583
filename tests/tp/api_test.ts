/**
 * Tensor parallelism through the public API, on the CPU: `POST /models/load` with
 * `tensor_parallel: 2` runs the model over two processes that answer every golden prompt
 * as one rank does (same greedy tokens, same top log-probabilities, requests batched
 * together); killing the worker mid-stream ends that stream with a clear error, the model
 * goes `recovering` and comes back `loaded`; a model whose split would cut quantization
 * blocks is refused saying why; no worker process outlives its model.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { fixture, type GoldenPrompt, LOGIT_TOLERANCE, modelGolden } from "../fixtures.ts";
import { nativeNode, parseSse, streamEnd, v1 } from "../native/support.ts";
import { until, workersOn } from "./support/children.ts";

type Json = Record<string, unknown>;

/** llama.cpp's end-of-generation set for this vocabulary (fixtures/README.md). */
const EOG = new Set([128247, 151643, 151645, 151662, 151663, 151664]);
const TINY = fixture("qwen3-tiny-q8_0.gguf");
/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 12;

interface Answer {
  ids: number[];
  /** Per generated token: the top-5 candidates and their log-probabilities. */
  top: Array<Record<string, number>>;
}

async function load(node: TestNode, path: string, tp: number): Promise<Response> {
  return await node.post("/models/load", {
    model_id: path,
    harness: "native",
    tensor_parallel: tp,
    devices: tp === 1 ? [0] : [0, LABEL],
  });
}

async function complete(node: TestNode, model: string, p: GoldenPrompt): Promise<Answer> {
  const res = await v1(node, "completions", {
    model,
    prompt: p.tokens,
    temperature: 0,
    max_tokens: 32,
    logprobs: 5,
    return_tokens_as_token_ids: true,
  });
  const body = await jsonOf(res) as Json;
  assertEquals(res.status, 200, JSON.stringify(body));
  const lp = (body.choices as Json[])[0].logprobs as {
    tokens: string[];
    top_logprobs: Array<Record<string, number>>;
  };
  return { ids: lp.tokens.map((t) => Number(t.slice("token_id:".length))), top: lp.top_logprobs };
}

/** The golden greedy continuation as the API returns it: cut after the first EOG token. */
function goldenIds(p: GoldenPrompt): number[] {
  const ids = p.greedy.map((s) => s.id);
  const eog = ids.findIndex((id) => EOG.has(id));
  return eog < 0 ? ids : ids.slice(0, eog + 1);
}

async function answerAll(node: TestNode, tp: number): Promise<Answer[]> {
  const res = await load(node, TINY, tp);
  assertEquals(res.status, 200, await res.text());
  assertEquals(
    workersOn(LABEL).length,
    tp - 1,
    `tensor_parallel ${tp} runs ${tp - 1} worker process(es)`,
  );
  const answers = await Promise.all(
    modelGolden("qwen3-tiny-q8_0").prompts.map((p) => complete(node, TINY, p)),
  );
  const unload = await node.post("/models/unload", { model_id: TINY });
  assertEquals(unload.status, 200);
  await unload.body?.cancel();
  assertEquals(workersOn(LABEL), [], "unload reaps every worker");
  return answers;
}

Deno.test("tp api: two ranks answer every golden prompt as one rank does", async () => {
  await withNode(nativeNode({ maxInFlight: 16 }), async (node) => {
    const one = await answerAll(node, 1);
    const two = await answerAll(node, 2);
    const prompts = modelGolden("qwen3-tiny-q8_0").prompts;
    // Partial sums round a little differently, and Q8_0's 8-bit activations can turn that
    // into a step of one quantum (measured: under 0.1); a missing or doubled partial sum
    // moves logits by whole units.
    const tolerance = LOGIT_TOLERANCE["qwen3-tiny-q8_0"];
    let worst = 0;
    prompts.forEach((p, i) => {
      assertEquals(two[i].ids, goldenIds(p), `${p.name}: greedy tokens on two ranks`);
      assertEquals(two[i].ids, one[i].ids, `${p.name}: two ranks and one`);
      two[i].top.forEach((top, k) => {
        const other = one[i].top[k];
        const floor = Math.min(...Object.values(other));
        for (const [tok, lp] of Object.entries(top)) {
          // A candidate only one side ranks in its top 5 must be a near-tie for 5th place.
          const d = tok in other ? Math.abs(lp - other[tok]) : Math.max(0, lp - floor);
          worst = Math.max(worst, d);
          assert(d <= tolerance, `${p.name} step ${k} ${tok}: log-probs differ by ${d}`);
        }
      });
    });
    console.log(`top-5 log-probs, two ranks vs one: max difference ${worst.toFixed(5)}`);
  });
});

Deno.test("tp api: a worker killed mid-stream: clean error, recovering, then loaded again", async () => {
  await withNode(nativeNode(), async (node) => {
    const res = await load(node, TINY, 2);
    assertEquals(res.status, 200, await res.text());
    const [worker] = workersOn(LABEL);
    assert(worker, "a worker process runs");

    const stream = await v1(node, "completions", {
      model: TINY,
      prompt: "The quick brown fox",
      max_tokens: 900,
      temperature: 1,
      seed: 7,
      stream: true,
    });
    assertEquals(stream.status, 200);
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value);
    Deno.kill(worker.pid, "SIGKILL");

    // Watch /models while the stream ends and the model reloads.
    const statuses: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const list = await jsonOf(await node.get("/models")) as Json[];
        const status = String(list[0]?.status);
        if (statuses.at(-1) !== status) statuses.push(status);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    const end = streamEnd(parseSse(text).frames);
    assertEquals([end.fault?.code, end.finishReason], ["tp_worker_failed", "error"]);
    assertMatch(
      String(end.fault?.message),
      new RegExp(`pid ${worker.pid}\\) was killed by SIGKILL`),
    );
    assert(end.usage.completion_tokens > 0, "the usage of what was generated");

    await until(
      () => statuses.at(-1) === "loaded" && statuses.includes("recovering"),
      30_000,
      "recovery",
    );
    watching = false;
    await watcher;
    assertEquals(statuses.slice(-2), ["recovering", "loaded"]);
    assert(
      node.logs.some((l) => l.includes("model recovering") && l.includes("was killed by SIGKILL")),
      "the recovery is logged with its reason",
    );
    const [replacement] = workersOn(LABEL);
    assert(replacement && replacement.pid !== worker.pid, "a new worker serves the model");

    // Served again, correctly.
    const p = modelGolden("qwen3-tiny-q8_0").prompts.find((q) => q.name === "text_fox")!;
    assertEquals((await complete(node, TINY, p)).ids, goldenIds(p));
    const unload = await node.post("/models/unload", { model_id: TINY });
    assertEquals(unload.status, 200);
    await unload.body?.cancel();
    assertEquals(workersOn(LABEL), []);
  });
});

Deno.test("tp api: a split that would cut Q4_K blocks is refused, saying why", async () => {
  await withNode(nativeNode(), async (node) => {
    const path = fixture("qwen3-small-q4_k_m.gguf");
    const res = await load(node, path, 2);
    const body = await jsonOf(res) as Json;
    assertEquals(res.status, 400, JSON.stringify(body));
    assertEquals(body.code, "tensor_parallel_unavailable");
    assertMatch(
      String(body.error),
      /tensor_parallel=2: cannot split blk\.0\.attn_output\.weight \(Q4_K\) over 2 ranks: 128 of its 256 input columns per rank is not a whole number of Q4_K blocks/,
    );
    assertEquals(await jsonOf(await node.get("/models")), []);
    assertEquals(workersOn(LABEL), []);
  });
});

Deno.test("tp api: a model whose recovery failed is failed, and a new load replaces it", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/tiny.gguf`;
  await Deno.copyFile(TINY, path);
  try {
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      const res = await load(node, path, 2);
      assertEquals(res.status, 200, await res.text());
      // The reload that recovery tries cannot find the file.
      await Deno.rename(path, `${path}.away`);
      const [worker] = workersOn(LABEL);
      Deno.kill(worker.pid, "SIGKILL");
      const failed = await v1(node, "completions", { model: path, prompt: "Hi", max_tokens: 8 });
      await failed.body?.cancel();
      const status = async (): Promise<Json | undefined> =>
        (await jsonOf(await node.get("/models")) as Json[])[0];
      const entry = await eventually(
        async () => (await status())?.status === "failed" ? await status() : undefined,
        30_000,
        "the recovery failing",
      );
      assertEquals((entry.servable as Json).reason, "recovery_failed");

      await Deno.rename(`${path}.away`, path);
      const again = await load(node, path, 2);
      assertEquals(again.status, 200, await again.text());
      assertEquals((await status())?.status, "loaded");
      const p = modelGolden("qwen3-tiny-q8_0").prompts.find((q) => q.name === "text_fox")!;
      assertEquals((await complete(node, path, p)).ids, goldenIds(p));
      const unload = await node.post("/models/unload", { model_id: path });
      await unload.body?.cancel();
      assertEquals(workersOn(LABEL), []);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
