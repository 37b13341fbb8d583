/**
 * Hub downloads against a local hub-compatible server: cold download into the standard
 * cache layout, cache hits (also with the server gone), resume after a cut connection and
 * from a previous run's partial file, sha256 mismatch, offline mode, unknown repositories,
 * quants that match nothing, a single download for concurrent requests, the token.
 */
import { captureLogs } from "../../src/common/log.ts";
import { fetchModelFile, HubError, type HubSource } from "../../src/hub/mod.ts";
import { fixture } from "../fixtures.ts";
import { assert, assertEquals, assertRejects, assertStringIncludes } from "../support/assert.ts";
import { type FakeHub, type HubRepo, sha256, startFakeHub } from "./fake_hub.ts";

captureLogs(() => {});

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const Q8 = Deno.readFileSync(fixture("qwen3-tiny-q8_0.gguf"));
const Q4 = Deno.readFileSync(fixture("qwen3-tiny-q4_0.gguf"));
const README = new TextEncoder().encode("# tiny\n");
const REPO: HubRepo = {
  id: "test-org/Tiny-GGUF",
  commit: COMMIT,
  files: [
    { name: "README.md", bytes: README, lfs: false },
    { name: "qwen3-tiny-Q8_0.gguf", bytes: Q8, lfs: true },
    { name: "q4/qwen3-tiny-Q4_0.gguf", bytes: Q4, lfs: true },
  ],
};
const REF = { scheme: null, org: "test-org", name: "Tiny-GGUF" };
const REPO_DIR = "models--test-org--Tiny-GGUF";

async function withHub(fn: (hub: FakeHub, source: HubSource) => Promise<void>): Promise<void> {
  const hub = startFakeHub([REPO]);
  const cacheDir = await Deno.makeTempDir({ prefix: "neuron-hub-" });
  try {
    await fn(hub, { scheme: "hf", endpoint: hub.url, cacheDir, offline: false });
  } finally {
    await hub.stop();
    await Deno.remove(cacheDir, { recursive: true });
  }
}

function cdnGets(hub: FakeHub): number {
  return hub.seen.filter((r) => r.method === "GET" && r.path.startsWith("/cdn/")).length;
}

async function hubError(fn: () => Promise<unknown>, code: string): Promise<HubError> {
  const err = await assertRejects(fn, HubError);
  assertEquals(err.code, code, err.message);
  return err;
}

Deno.test("hub: cold download lands in the standard cache layout", async () => {
  await withHub(async (hub, source) => {
    const got = await fetchModelFile(source, REF, { quant: "q8_0" });
    assertEquals(got.file, "qwen3-tiny-Q8_0.gguf");
    assertEquals(got.commit, COMMIT);
    assertEquals(got.cached, false);
    const dir = `${source.cacheDir}/${REPO_DIR}`;
    assertEquals(got.path, `${dir}/snapshots/${COMMIT}/qwen3-tiny-Q8_0.gguf`);
    assertEquals(await Deno.readLink(got.path), `../../blobs/${sha256(Q8)}`);
    assertEquals(sha256(await Deno.readFile(got.path)), sha256(Q8));
    assertEquals((await Deno.readTextFile(`${dir}/refs/main`)).trim(), COMMIT);
    const blobs = await Array.fromAsync(Deno.readDir(`${dir}/blobs`));
    assertEquals(blobs.map((b) => b.name), [sha256(Q8)], "no .incomplete left behind");

    // A file in a folder: the symlink climbs one level more.
    const q4 = await fetchModelFile(source, REF, { quant: "Q4_0" });
    assertEquals(q4.file, "q4/qwen3-tiny-Q4_0.gguf");
    assertEquals(await Deno.readLink(q4.path), `../../../blobs/${sha256(Q4)}`);
    assertEquals(sha256(await Deno.readFile(q4.path)), sha256(Q4));

    // Cache hit: only the listing is asked for.
    const before = hub.seen.length;
    const again = await fetchModelFile(source, REF, { quant: "q8_0" });
    assertEquals(again.cached, true);
    assertEquals(hub.seen.slice(before).map((r) => r.path), [
      `/api/models/${REPO.id}/revision/main`,
    ]);
  });
});

Deno.test("hub: cache hit with the server stopped, and offline mode", async () => {
  await withHub(async (hub, source) => {
    await hubError(
      () => fetchModelFile({ ...source, offline: true }, REF, { quant: "q8_0" }),
      "not_cached",
    );
    const first = await fetchModelFile(source, REF, { quant: "q8_0" });
    await hub.stop();
    const down = await fetchModelFile(source, REF, { quant: "q8_0" });
    assertEquals([down.path, down.cached], [first.path, true]);
    const offline = await fetchModelFile({ ...source, offline: true }, REF, { quant: "Q8_0" });
    assertEquals(offline.path, first.path);
    // What is not cached cannot come from a stopped hub: the (retryable) network error says so.
    const err = await hubError(
      () => fetchModelFile(source, REF, { quant: "q4_0" }),
      "hub_unreachable",
    );
    assertStringIncludes(err.message, hub.url);
    // Offline, the cache's own files are listed.
    const off = await hubError(
      () => fetchModelFile({ ...source, offline: true }, REF, { quant: "q4_0" }),
      "quant_not_found",
    );
    assertStringIncludes(off.message, "qwen3-tiny-Q8_0.gguf");
  });
});

Deno.test("hub: a cut connection is resumed with Range; so is a previous run's partial file", async () => {
  await withHub(async (hub, source) => {
    const progress: number[] = [];
    hub.cutNextDownload("qwen3-tiny-Q8_0.gguf", 5_000_000);
    const got = await fetchModelFile(source, REF, {
      quant: "q8_0",
      onProgress: (p) => progress.push(p.bytes),
    });
    assertEquals(sha256(await Deno.readFile(got.path)), sha256(Q8));
    const gets = hub.seen.filter((r) => r.method === "GET" && r.path.startsWith("/cdn/"));
    assertEquals(gets.map((r) => r.range), [null, "bytes=5000000-"]);
    assertEquals(progress.at(-1), Q8.length);

    // A partial file left by an earlier process: only the rest is fetched.
    const blob = `${source.cacheDir}/${REPO_DIR}/blobs/${sha256(Q4)}`;
    await Deno.writeFile(`${blob}.incomplete`, Q4.subarray(0, 1_234_567));
    const q4 = await fetchModelFile(source, REF, { quant: "q4_0" });
    assertEquals(sha256(await Deno.readFile(q4.path)), sha256(Q4));
    assertEquals(hub.seen.at(-1)!.range, "bytes=1234567-");
  });
});

Deno.test("hub: a sha256 mismatch is refused and leaves nothing in the cache", async () => {
  await withHub(async (hub, source) => {
    hub.lieAboutSha("qwen3-tiny-Q8_0.gguf", "f".repeat(64));
    const err = await hubError(
      () => fetchModelFile(source, REF, { quant: "q8_0" }),
      "integrity_failed",
    );
    assertStringIncludes(err.message, "f".repeat(64));
    const dir = `${source.cacheDir}/${REPO_DIR}`;
    assertEquals(await Array.fromAsync(Deno.readDir(`${dir}/blobs`)), []);
    const snap = await Array.fromAsync(Deno.readDir(`${dir}/snapshots`)).catch(() => []);
    assertEquals(snap, []);
  });
});

Deno.test("hub: unknown repo, quant matching nothing, several files without a quant", async () => {
  await withHub(async (_hub, source) => {
    const missing = await hubError(
      () => fetchModelFile(source, { scheme: null, org: "test-org", name: "Nope" }),
      "repo_not_found",
    );
    assertStringIncludes(missing.message, "test-org/Nope");
    const quant = await hubError(
      () => fetchModelFile(source, REF, { quant: "q5_k_m" }),
      "quant_not_found",
    );
    assertStringIncludes(quant.message, "qwen3-tiny-Q8_0.gguf, q4/qwen3-tiny-Q4_0.gguf");
    const none = await hubError(() => fetchModelFile(source, REF, {}), "quant_required");
    assertStringIncludes(none.message, "qwen3-tiny-Q8_0.gguf");
  });
});

Deno.test("hub: concurrent requests for one file download it once", async () => {
  await withHub(async (hub, source) => {
    const all = await Promise.all(
      Array.from({ length: 4 }, () => fetchModelFile(source, REF, { quant: "q8_0" })),
    );
    assertEquals(new Set(all.map((f) => f.path)).size, 1);
    assertEquals(cdnGets(hub), 1);
    assertEquals(sha256(await Deno.readFile(all[0].path)), sha256(Q8));
  });
});

Deno.test("hub: the token goes to the hub as a bearer, never to the CDN", async () => {
  await withHub(async (hub, source) => {
    await fetchModelFile({ ...source, token: "hf_secret" }, REF, { quant: "q8_0" });
    const api = hub.seen.filter((r) => !r.path.startsWith("/cdn/"));
    assert(api.length >= 2, "listing and HEAD");
    assert(api.every((r) => r.authorization === "Bearer hf_secret"), "hub calls carry the token");
    const cdn = hub.seen.filter((r) => r.path.startsWith("/cdn/"));
    assertEquals(cdn.map((r) => r.authorization), [null], "the CDN (another origin) gets none");
  });
});
