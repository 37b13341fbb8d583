/**
 * An upstream's error answer reaches the client in neuron's OpenAI envelope, whatever shape
 * the upstream gave it (llama-server, vLLM, plain text from a proxy, compressed or not),
 * with the upstream's status and Retry-After, and what the upstream said under
 * `error.upstream`.
 */
import { assertEquals } from "../support/assert.ts";
import { MAX_MODEL_LEN } from "../support/fake_upstream.ts";
import { jsonOf } from "../support/node.ts";
import { chatBody, type Json, MODEL, withUpstream } from "./upstream_node.ts";

function post(url: string, body: string, headers: Record<string, string> = {}) {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
}

const TOO_LONG = MAX_MODEL_LEN; // 7 prompt tokens + this many is past the context

Deno.test("external (mistralrs): a model the upstream does not serve is its 404, wrapped", async () => {
  await withUpstream({ models: [MODEL], unloaded: ["other/model"] }, async (_up, node) => {
    const res = await post(node.url, chatBody(false, 5, "other/model"));
    assertEquals(res.status, 404);
    assertEquals(res.headers.get("content-type"), "application/json");
    assertEquals(await jsonOf(res), {
      error: {
        message: "model other/model not found",
        type: "invalid_request_error",
        code: "upstream_error",
        param: null,
        upstream: {
          status: 404,
          body: {
            error: { message: "model other/model not found", type: "invalid_request_error" },
          },
        },
      },
    });
  });
});

Deno.test("external (llama_router): llama-server's context error is context_length_exceeded", async () => {
  await withUpstream(
    { models: [MODEL], api: "llama_router" },
    async (_up, node) => {
      const res = await post(node.url, chatBody(true, TOO_LONG));
      assertEquals(res.status, 400);
      const message = `request (${
        7 + TOO_LONG
      } tokens) exceeds the available context size (${MAX_MODEL_LEN} tokens), try increasing it`;
      assertEquals(await jsonOf(res), {
        error: {
          message,
          type: "invalid_request_error",
          code: "context_length_exceeded",
          param: null,
          upstream: {
            status: 400,
            body: {
              error: {
                code: 400,
                message,
                type: "exceed_context_size_error",
                n_prompt_tokens: 7 + TOO_LONG,
                n_ctx: MAX_MODEL_LEN,
              },
            },
          },
        },
      });
    },
    {},
    "llama",
  );
});

Deno.test("external (none): vLLM's flat error body is read, and its 404 for a model too", async () => {
  await withUpstream(
    { models: [MODEL], api: "none" },
    async (_up, node) => {
      const res = await post(node.url, chatBody(false, TOO_LONG));
      assertEquals(res.status, 400);
      const err = (await jsonOf(res) as { error: Json }).error;
      assertEquals(err.code, "context_length_exceeded");
      assertEquals(err.type, "invalid_request_error");
      assertEquals(
        String(err.message).startsWith(`This model's maximum context length is ${MAX_MODEL_LEN}`),
        true,
      );
      assertEquals((err.upstream as Json).status, 400);
      assertEquals(((err.upstream as Json).body as Json).type, "BadRequestError");
    },
    {},
    "vllm",
  );
});

Deno.test("external: a busy upstream's 503 keeps its status and Retry-After; text is kept", async () => {
  await withUpstream({ models: [MODEL] }, async (_up, node) => {
    const res = await post(node.url, chatBody(true), { "x-fake-status": "503" });
    assertEquals(res.status, 503);
    assertEquals(res.headers.get("retry-after"), "7");
    assertEquals(await jsonOf(res), {
      error: {
        message: "upstream busy, try later",
        type: "server_error",
        code: "upstream_error",
        param: null,
        upstream: { status: 503, body: "upstream busy, try later\n" },
      },
    });
  });
});

Deno.test("external: a compressed error body is inflated once, into a plain envelope", async () => {
  await withUpstream(
    { models: [MODEL], api: "llama_router" },
    async (_up, node) => {
      const res = await post(node.url, chatBody(false, TOO_LONG), {
        "x-fake-gzip": "1",
        "accept-encoding": "identity",
      });
      assertEquals(res.status, 400);
      assertEquals(res.headers.get("content-encoding"), null);
      const err = (await jsonOf(res) as { error: Json }).error;
      assertEquals(err.code, "context_length_exceeded");
      assertEquals(((err.upstream as Json).body as { error: Json }).error.n_ctx, MAX_MODEL_LEN);
    },
    {},
    "llama",
  );
});
