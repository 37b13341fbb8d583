/**
 * The hub saying no, or not now: 429 with Retry-After waited out, 5xx retried with
 * backoff, all within the fetch's budget; the cached copy used instead when the hub
 * refuses (401, 403, 404, 429, 503), with the reason logged; without one, the hub's own
 * words (X-Error-Message: the gated repository's "ask for access") in the error.
 */
import { captureLogs } from "../../src/common/log.ts";
import { fetchModelFile } from "../../src/hub/mod.ts";
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import type { Refusal } from "./fake_hub.ts";
import { fetchQuick, hubError, Q8, REF, REPO, withHub } from "./support.ts";
import { sha256 } from "./fake_hub.ts";

const lines: string[] = [];
captureLogs((line) => lines.push(line));

const LISTING = `/api/models/${REPO.id}/revision/main`;

Deno.test("rate limits: 429 three times with Retry-After: 1, then the download", async () => {
  await withHub(async (hub, source) => {
    hub.refuse("rate_limited", 3, 1);
    const got = await fetchModelFile(source, REF, { quant: "q8_0" });
    assertEquals(sha256(await Deno.readFile(got.path)), sha256(Q8));
    const listings = hub.seen.filter((r) => r.path === LISTING);
    assertEquals(listings.length, 4, "three refused, the fourth answered");
    const waits = lines.filter((l) => l.includes("retrying")).map((l) => JSON.parse(l).retry_in_ms);
    // The first refusal finds no cached copy; the two after it are waited out as asked.
    assertEquals(waits, [1000, 1000]);
  });
});

Deno.test("rate limits: a wait longer than the budget fails at once, saying how long to wait", async () => {
  await withHub(async (hub, source) => {
    hub.refuse("rate_limited", 2, 120);
    const err = await hubError(
      () => fetchModelFile(source, REF, { quant: "q8_0", retry: { budgetMs: 60_000 } }),
      "hub_rate_limited",
    );
    assertEquals(err.retryAfter, 120);
    assertStringIncludes(err.message, `${new URL(hub.url).host} is rate limiting us`);
    assertStringIncludes(err.message, "retry in 120 s");
    assertStringIncludes(err.message, "We had to rate limit your IP");
    assertEquals(hub.seen.length, 2, "asked twice (the second time to wait), never waited");
  });
});

Deno.test("5xx: retried with backoff within the budget", async () => {
  await withHub(async (hub, source) => {
    hub.refuse("unavailable", 3);
    const got = await fetchQuick(source, "q8_0");
    assertEquals(got.cached, false);
    hub.refuse("unavailable", 100);
    const err = await hubError(() => fetchQuick(source, "q4_0"), "hub_unreachable");
    assertStringIncludes(err.message, `${new URL(hub.url).host} answered HTTP 503`);
    assertEquals(err.status, 503);
  });
});

const REFUSALS: [Refusal, number][] = [
  ["private", 401],
  ["gated", 403],
  ["gone", 404],
  ["rate_limited", 429],
  ["unavailable", 503],
];

Deno.test("refusals: the cached copy is used when the hub refuses, and the log says why", async () => {
  await withHub(async (hub, source) => {
    const first = await fetchModelFile(source, REF, { quant: "q8_0" });
    for (const [refusal, status] of REFUSALS) {
      lines.length = 0;
      const before = hub.seen.length;
      hub.refuse(refusal, 1, 60);
      const got = await fetchModelFile(source, REF, { quant: "q8_0" });
      assertEquals([got.path, got.cached], [first.path, true], refusal);
      assertEquals(hub.seen.length - before, 1, `${refusal}: one request, no retries`);
      const why = lines.map((l) => JSON.parse(l)).find((l) =>
        l.msg.includes("using the cached copy")
      );
      assert(why, `${refusal}: logged`);
      assertEquals([why.status, why.file], [status, "qwen3-tiny-Q8_0.gguf"]);
      assertStringIncludes(why.error, `HTTP ${status}`);
    }
  });
});

Deno.test("refusals: without a cached copy, the hub's own words, and no retry of a no", async () => {
  await withHub(async (hub, source) => {
    const host = new URL(hub.url).host;
    hub.refuse("gated", 1);
    const gated = await hubError(() => fetchQuick(source, "q8_0"), "hub_unauthorized");
    assertStringIncludes(gated.message, `${host} refused access to ${REPO.id} (HTTP 403)`);
    assertStringIncludes(
      gated.message,
      `Visit https://huggingface.co/${REPO.id} to ask for access`,
    );
    hub.refuse("private", 1);
    const hidden = await hubError(() => fetchQuick(source, "q8_0"), "repo_not_found");
    assertStringIncludes(hidden.message, "HTTP 401");
    assertStringIncludes(hidden.message, "a private repository needs a token (HF_TOKEN");
    assertEquals(hub.seen.length, 2, "refusals are final: asked once each");
    const wrongRev = await hubError(
      () => fetchQuick(source, "q8_0", {}, { ...REF, revision: "v9" }),
      "revision_not_found",
    );
    assertStringIncludes(wrongRev.message, "has no revision v9");
  });
});
