/**
 * Compressed bodies through the external harness, both ways. An upstream that compresses its
 * answer (despite being asked for `identity`) reaches the client still compressed and still
 * saying so: neither inflated twice nor stripped of its `content-encoding`. A client's gzip
 * request is inflated once by the node, which must read it, and goes upstream plain, since
 * upstreams such as vLLM cannot read compressed requests.
 */
import { assertEquals } from "../support/assert.ts";
import { completionBody, streamFrames } from "../support/fake_upstream.ts";
import { jsonOf } from "../support/node.ts";
import { bodySeen, chatBody, type Json, MODEL, sha256, withUpstream } from "./upstream_node.ts";

async function gzip(text: string): Promise<Uint8Array<ArrayBuffer>> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function gunzip(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}

Deno.test("external: a gzip answer keeps its content-encoding and is inflated only by the client", async () => {
  await withUpstream({ models: [MODEL] }, async (_up, node) => {
    const headers = {
      "content-type": "application/json",
      "x-request-id": "chatcmpl-gz",
      "x-fake-gzip": "1",
    };
    const url = `${node.url}/v1/chat/completions`;
    // A client that takes the bytes as they come: they are gzip, and say so.
    const raw = await fetch(url, {
      method: "POST",
      headers: { ...headers, "accept-encoding": "identity" },
      body: chatBody(false),
    });
    assertEquals(raw.status, 200);
    assertEquals(raw.headers.get("content-encoding"), "gzip");
    assertEquals(raw.headers.get("x-fake-saw-accept-encoding"), "identity");
    const bytes = new Uint8Array(await raw.arrayBuffer());
    assertEquals(await gunzip(bytes), completionBody("chatcmpl-gz", MODEL));

    // A client that inflates (fetch's default): it gets the answer, inflated once.
    const plain = await fetch(url, { method: "POST", headers, body: chatBody(false) });
    assertEquals(await plain.text(), completionBody("chatcmpl-gz", MODEL));

    const sse = await fetch(url, { method: "POST", headers, body: chatBody(true, 3) });
    assertEquals(sse.headers.get("content-encoding"), "gzip");
    assertEquals(await sse.text(), streamFrames("chatcmpl-gz", MODEL, 3, true).join(""));
  });
});

Deno.test("external: a gzip request is inflated once and sent upstream plain", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    const body = chatBody(false);
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "x-request-id": "chatcmpl-gzreq",
      },
      body: await gzip(body),
    });
    assertEquals(res.status, 200);
    assertEquals(res.headers.get("x-fake-saw-content-encoding"), "");
    assertEquals(res.headers.get("x-fake-request-sha256"), await sha256(body));
    assertEquals(await res.text(), completionBody("chatcmpl-gzreq", MODEL));
    assertEquals(await bodySeen(up, "chatcmpl-gzreq"), body);
  });
});

Deno.test("external: a request body neuron cannot inflate is a clear 4xx", async () => {
  await withUpstream({ models: [MODEL] }, async (_up, node) => {
    const send = (encoding: string, body: BodyInit) =>
      fetch(`${node.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": encoding },
        body,
      });
    const br = await send("br", chatBody(false));
    assertEquals(br.status, 415);
    const brErr = (await jsonOf(br) as { error: Json }).error;
    assertEquals(brErr.code, "unsupported_media_type");
    assertEquals(String(brErr.message).includes("br"), true);

    const broken = await send("gzip", chatBody(false));
    assertEquals(broken.status, 400);
    assertEquals(((await jsonOf(broken)) as { error: Json }).error.code, "malformed_json");
  });
});
