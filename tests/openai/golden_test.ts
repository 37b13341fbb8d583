/**
 * End to end against the goldens: each fixture model loaded into a node, every golden
 * chat prompt sent at temperature 0 with max_tokens 32. The generated token ids (from
 * logprobs, as `token_id:<n>`) are the golden greedy continuation up to its first
 * end-of-generation token, streaming deltas add up to the same text, and usage counts the
 * golden prompt and the tokens generated. Completions do the same for the text prompts,
 * given as text and as token ids.
 */
import { type GoldenPrompt, MODEL_FIXTURES, modelGolden } from "../fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, type TestNode, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, parseSse, v1 } from "../native/support.ts";

type Json = Record<string, unknown>;

/** llama.cpp's end-of-generation set for this vocabulary (fixtures/README.md). */
const EOG = new Set([128247, 151643, 151645, 151662, 151663, 151664]);
const MAX_TOKENS = 32;

/** The golden continuation as the API returns it: cut after the first EOG token. */
function expectedIds(p: GoldenPrompt): { ids: number[]; finish: string } {
  const ids = p.greedy.map((s) => s.id);
  const eog = ids.findIndex((id) => EOG.has(id));
  return eog < 0 ? { ids, finish: "length" } : { ids: ids.slice(0, eog + 1), finish: "stop" };
}

function idsFromLogprobs(tokens: { token: string }[]): number[] {
  return tokens.map((t) => Number(/^token_id:(\d+)$/.exec(t.token)![1]));
}

function chatBody(model: string, p: GoldenPrompt, stream: boolean): Json {
  return {
    model,
    messages: p.messages,
    ...(p.tools ? { tools: p.tools } : {}),
    ...(p.chat_template_kwargs ? { chat_template_kwargs: p.chat_template_kwargs } : {}),
    temperature: 0,
    max_tokens: MAX_TOKENS,
    logprobs: true,
    return_tokens_as_token_ids: true,
    stream,
  };
}

// Golden prompts without kwargs were rendered with the template's default (thinking on);
// the header asks for the same, as the gateway does for clients that show reasoning.
const THINKING = { "x-include-thinking": "1" };

async function checkChat(node: TestNode, model: string, p: GoldenPrompt): Promise<void> {
  const want = expectedIds(p);
  const what = `${model.split("/").at(-1)} ${p.name}`;
  const [res, sres] = await Promise.all([
    v1(node, "chat/completions", chatBody(model, p, false), THINKING),
    v1(node, "chat/completions", chatBody(model, p, true), THINKING),
  ]);
  const body = await jsonOf(res) as Json;
  assertEquals(res.status, 200, `${what}: ${JSON.stringify(body)}`);
  const choice = (body.choices as Json[])[0];
  const ids = idsFromLogprobs((choice.logprobs as { content: { token: string }[] }).content);
  assertEquals(ids, want.ids, `${what}: token ids`);
  assertEquals(choice.finish_reason, want.finish, `${what}: finish_reason`);
  checkUsage(body.usage as Json, p.tokens.length, want.ids.length, what);
  const message = choice.message as Json;
  const text = String(message.content ?? "");
  if (want.finish === "length" && !message.reasoning_content) {
    assertEquals(text, p.greedy_text, `${what}: text`);
  }

  assertEquals(sres.status, 200);
  assertEquals(sres.headers.get("content-type"), "text/event-stream");
  const { frames } = parseSse(await sres.text());
  const chunks = frames.slice(0, -1).map((f) => f.data as Json);
  assertEquals(frames.at(-1)!.data, "[DONE]");
  const deltas = chunks.filter((c) => (c.choices as Json[]).length > 0)
    .map((c) => ((c.choices as Json[])[0].delta as Json));
  const streamed = deltas.map((d) => d.content ?? "").join("");
  assertEquals(streamed, text, `${what}: streamed text`);
  const streamedIds = chunks.flatMap((c) => {
    const lp = (c.choices as Json[])[0]?.logprobs as { content: { token: string }[] } | null;
    return lp ? idsFromLogprobs(lp.content) : [];
  });
  assertEquals(streamedIds, want.ids, `${what}: streamed token ids`);
  checkUsage(chunks.at(-1)!.usage as Json, p.tokens.length, want.ids.length, `${what} streamed`);
}

/** Exact counts. The same prompt sent twice at once may find the other's first blocks
 * cached, or not, depending on which step each joined: cached tokens only have a bound. */
function checkUsage(usage: Json, prompt: number, completion: number, what: string): void {
  const { prompt_tokens_details: details, ...counts } = usage;
  assertEquals(counts, {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  }, `${what}: usage`);
  const cached = (details as { cached_tokens: number } | undefined)?.cached_tokens ?? 0;
  assert(cached >= 0 && cached < prompt, `${what}: ${cached} cached of ${prompt}`);
}

async function checkCompletion(node: TestNode, model: string, p: GoldenPrompt): Promise<void> {
  const want = expectedIds(p);
  // Raw prompts are token ids only; text prompts go both ways.
  const prompts = p.text !== undefined ? [p.text, p.tokens] : [p.tokens];
  await Promise.all(prompts.map(async (prompt) => {
    const res = await v1(node, "completions", {
      model,
      prompt,
      temperature: 0,
      max_tokens: MAX_TOKENS,
      logprobs: 0,
      return_tokens_as_token_ids: true,
    });
    const body = await jsonOf(res) as Json;
    assertEquals(res.status, 200, JSON.stringify(body));
    const choice = (body.choices as Json[])[0];
    const tokens = (choice.logprobs as { tokens: string[] }).tokens;
    const ids = tokens.map((t) => Number(t.slice("token_id:".length)));
    assertEquals(ids, want.ids, `${p.name} (${typeof prompt === "string" ? "text" : "ids"})`);
    assertEquals((body.usage as Json).prompt_tokens, p.tokens.length);
    if (want.finish === "length") assertEquals(choice.text, p.greedy_text);
  }));
}

for (const name of MODEL_FIXTURES) {
  Deno.test(`golden e2e: ${name}: chat (plain and streamed) and completions`, async () => {
    const golden = modelGolden(name);
    // All prompts at once: the engine batches them, as it would real traffic.
    await withNode(nativeNode({ maxInFlight: 16 }), async (node) => {
      const model = await loadFixture(node, `${name}.gguf`);
      await Promise.all(
        golden.prompts.map((p) =>
          p.messages ? checkChat(node, model, p) : checkCompletion(node, model, p)
        ),
      );
    });
  });
}

Deno.test("golden e2e: a stop string spanning tokens ends the answer just before it", async () => {
  const hello = modelGolden("qwen3-tiny-q8_0").prompts.find((p) => p.name === "chat_hello")!;
  // "战胜" and "早日" are two tokens of the golden continuation; the stop spans both.
  const at = hello.greedy_text.indexOf("战胜早");
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    for (const stream of [false, true]) {
      const res = await v1(node, "chat/completions", {
        model,
        messages: hello.messages,
        temperature: 0,
        max_tokens: 32,
        stop: ["战胜早", "never"],
        stream,
      }, THINKING);
      const text = await res.text();
      let content: string;
      let finish: string;
      if (stream) {
        const chunks = parseSse(text).frames.slice(0, -1).map((f) => f.data as Json);
        const choices = chunks.flatMap((c) => c.choices as Json[]);
        content = choices.map((c) => (c.delta as Json).content ?? "").join("");
        finish = String(choices.at(-1)!.finish_reason);
      } else {
        const choice = (JSON.parse(text).choices as Json[])[0];
        content = String((choice.message as Json).content);
        finish = String(choice.finish_reason);
      }
      assertEquals([content, finish], [hello.greedy_text.slice(0, at), "stop"], `stream=${stream}`);
    }
  });
});
