/**
 * CORS for browser clients, off unless `[http] cors_origins` lists origins: preflights are
 * answered before authentication (browsers send them without credentials), allowed origins
 * see `Access-Control-Allow-Origin` on every answer (401s included, so a page can read
 * them), and an origin that is not listed sees no CORS header at all.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { ConfigError, validate } from "../../src/config/mod.ts";
import { assertThrows } from "../support/assert.ts";

const APP = "https://app.example.com";

function corsHeaders(res: Response): string[] {
  return [...res.headers.keys()].filter((k) => k.startsWith("access-control-"));
}

function preflight(url: string, origin: string, headers = "authorization, content-type") {
  return fetch(url, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": headers,
    },
  });
}

Deno.test("cors off (default): no CORS headers, preflight is an ordinary 405", async () => {
  await withNode({}, async (node) => {
    const res = await node.get("/v1/models", { headers: { origin: APP } });
    assertEquals(corsHeaders(res), []);
    await res.body?.cancel();
    const pre = await preflight(`${node.url}/v1/chat/completions`, APP);
    assertEquals(pre.status, 405);
    assertEquals(corsHeaders(pre), []);
    await pre.body?.cancel();
  });
});

Deno.test("cors with a listed origin: preflight before auth, headers on answers and 401s", async () => {
  const raw = { api_key: "s3cret", http: { cors_origins: [APP, "http://localhost:5173"] } };
  await withNode(raw, async (node) => {
    const pre = await preflight(
      `${node.url}/v1/chat/completions`,
      APP,
      "authorization, content-type, x-stainless-os",
    );
    assertEquals(pre.status, 204);
    assertEquals(pre.headers.get("access-control-allow-origin"), APP);
    assertStringIncludes(pre.headers.get("access-control-allow-methods") ?? "", "POST");
    assertEquals(
      pre.headers.get("access-control-allow-headers"),
      "authorization, content-type, x-stainless-os",
    );
    assertEquals(pre.headers.get("access-control-allow-credentials"), null);
    assertStringIncludes(pre.headers.get("vary") ?? "", "Origin");
    await pre.body?.cancel();

    const denied = await node.get("/v1/models", { headers: { origin: APP } });
    assertEquals(denied.status, 401);
    assertEquals(denied.headers.get("access-control-allow-origin"), APP);
    await denied.body?.cancel();

    const auth = { authorization: "Bearer s3cret" };
    const ok = await node.get("/v1/models", { headers: { origin: APP, ...auth } });
    assertEquals(ok.status, 200);
    assertEquals(ok.headers.get("access-control-allow-origin"), APP);
    assertStringIncludes(ok.headers.get("vary") ?? "", "Origin");
    assertEquals(ok.headers.get("access-control-allow-credentials"), null);
    assertEquals((await jsonOf(ok) as { object: string }).object, "list");

    // An origin that is not listed: no CORS headers, on preflights or answers.
    const evil = "https://evil.example.com";
    const evilPre = await preflight(`${node.url}/v1/chat/completions`, evil);
    assert(evilPre.status !== 204, `status ${evilPre.status}`);
    assertEquals(corsHeaders(evilPre), []);
    await evilPre.body?.cancel();
    const evilGet = await node.get("/v1/models", { headers: { origin: evil, ...auth } });
    assertEquals(evilGet.status, 200);
    assertEquals(corsHeaders(evilGet), []);
    await evilGet.body?.cancel();
    // Without an Origin (not a browser) nothing changes either.
    const plain = await node.get("/v1/models", { headers: auth });
    assertEquals(corsHeaders(plain), []);
    await plain.body?.cancel();
  });
});

Deno.test("cors_origins = ['*']: any origin, never with credentials", async () => {
  await withNode({ http: { cors_origins: ["*"] } }, async (node) => {
    const pre = await preflight(`${node.url}/models/load`, "https://anyone.example");
    assertEquals(pre.status, 204);
    assertEquals(pre.headers.get("access-control-allow-origin"), "*");
    assertEquals(pre.headers.get("access-control-allow-credentials"), null);
    await pre.body?.cancel();
    const res = await node.get("/health", { headers: { origin: "https://anyone.example" } });
    assertEquals(res.headers.get("access-control-allow-origin"), "*");
    await res.body?.cancel();
  });
});

Deno.test("cors_origins: '*' stands alone; entries are origins", () => {
  for (const bad of [["*", APP], ["app.example.com"], [`${APP}/path`], ["ftp://x.example"]]) {
    const err = assertThrows(
      () => validate({ http: { cors_origins: bad } }, "t.toml"),
      ConfigError,
    );
    assertStringIncludes(err.message, "http.cors_origins");
  }
});
