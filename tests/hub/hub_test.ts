/**
 * Hub downloads against the fake hub: cold download into the standard cache layout (LFS
 * through the CDN, Xet through the bridge, every GET ranged), cache hits (also with the
 * hub gone), resume after a cut or stalled connection and from a previous run's partial
 * file, sha256 mismatch, offline mode, unknown repositories, quants that match nothing, a
 * single download for concurrent requests, the token kept from the CDN.
 */
import { captureLogs } from "../../src/common/log.ts";
import { fetchModelFile } from "../../src/hub/mod.ts";
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { type FakeHub, sha256 } from "./fake_hub.ts";
import {
  COMMIT,
  fetchQuick,
  hubError,
  Q4,
  Q8,
  QUICK_RETRY,
  REF,
  REPO,
  REPO_DIR,
  withHub,
} from "./support.ts";

captureLogs(() => {});

function gets(hub: FakeHub, origin: "cdn" | "xet") {
  return hub.seen.filter((r) => r.method === "GET" && r.origin === origin);
}

Deno.test("hub: cold download lands in the standard cache layout", async () => {
  await withHub(async (hub, source) => {
    const got = await fetchModelFile(source, REF, { quant: "q8_0" });
    assertEquals([got.file, got.files, got.commit, got.cached], [
      "qwen3-tiny-Q8_0.gguf",
      ["qwen3-tiny-Q8_0.gguf"],
      COMMIT,
      false,
    ]);
    const dir = `${source.cacheDir}/${REPO_DIR}`;
    assertEquals(got.path, `${dir}/snapshots/${COMMIT}/qwen3-tiny-Q8_0.gguf`);
    assertEquals(await Deno.readLink(got.path), `../../blobs/${sha256(Q8)}`);
    assertEquals(sha256(await Deno.readFile(got.path)), sha256(Q8));
    // huggingface_hub writes the bare commit, no newline: so do we.
    assertEquals(await Deno.readTextFile(`${dir}/refs/main`), COMMIT);
    const blobs = await Array.fromAsync(Deno.readDir(`${dir}/blobs`));
    assertEquals(blobs.map((b) => b.name), [sha256(Q8)], "no .incomplete left behind");
    const locks = await Array.fromAsync(Deno.readDir(`${source.cacheDir}/.locks/${REPO_DIR}`));
    assertEquals(locks.map((l) => l.name), [`${sha256(Q8)}.lock`]);

    // A Xet file in a folder: through the bridge, and the symlink climbs one level more.
    const q4 = await fetchModelFile(source, REF, { quant: "Q4_0" });
    assertEquals(q4.file, "q4/qwen3-tiny-Q4_0.gguf");
    assertEquals(await Deno.readLink(q4.path), `../../../blobs/${sha256(Q4)}`);
    assertEquals(sha256(await Deno.readFile(q4.path)), sha256(Q4));
    // The bridge refuses unranged GETs of large files: every GET, the first too, has a Range.
    assertEquals(gets(hub, "cdn").map((r) => r.range), ["bytes=0-"]);
    assertEquals(gets(hub, "xet").map((r) => r.range), ["bytes=0-"]);

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
    // What is not cached cannot come from a stopped hub: the (retryable) network error,
    // after the retries the budget allows, names the host.
    const err = await hubError(() => fetchQuick(source, "q4_0"), "hub_unreachable");
    assertStringIncludes(err.message, new URL(hub.url).host);
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
    assertEquals(gets(hub, "cdn").map((r) => r.range), ["bytes=0-", "bytes=5000000-"]);
    assertEquals(progress.at(-1), Q8.length);

    // A partial file left by an earlier process: only the rest is fetched.
    const blob = `${source.cacheDir}/${REPO_DIR}/blobs/${sha256(Q4)}`;
    await Deno.writeFile(`${blob}.incomplete`, Q4.subarray(0, 1_234_567));
    const q4 = await fetchModelFile(source, REF, { quant: "q4_0" });
    assertEquals(sha256(await Deno.readFile(q4.path)), sha256(Q4));
    assertEquals(hub.seen.at(-1)!.range, "bytes=1234567-");
  });
});

Deno.test("hub: a stalled connection is cut and resumed from the bytes on disk", async () => {
  await withHub(async (hub, source) => {
    hub.stallNextDownload("qwen3-tiny-Q8_0.gguf", 3_000_000);
    const got = await fetchModelFile(source, REF, {
      quant: "q8_0",
      download: { stallTimeoutMs: 300 },
    });
    assertEquals(sha256(await Deno.readFile(got.path)), sha256(Q8));
    // What arrived before the stall is kept: only the rest is asked for.
    assertEquals(gets(hub, "cdn").map((r) => r.range), ["bytes=0-", "bytes=3000000-"]);
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
      () =>
        fetchModelFile(source, { scheme: null, org: "test-org", name: "Nope" }, {
          retry: QUICK_RETRY,
        }),
      "repo_not_found",
    );
    assertStringIncludes(missing.message, "test-org/Nope");
    const quant = await hubError(() => fetchQuick(source, "q5_k_m"), "quant_not_found");
    assertStringIncludes(quant.message, "q4/qwen3-tiny-Q4_0.gguf, qwen3-tiny-Q8_0.gguf");
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
    assertEquals(gets(hub, "cdn").length, 1);
    assertEquals(sha256(await Deno.readFile(all[0].path)), sha256(Q8));
  });
});

Deno.test("hub: the token goes to the hub as a bearer, never to the CDN or the Xet bridge", async () => {
  await withHub(async (hub, source) => {
    await fetchModelFile({ ...source, token: "hf_secret" }, REF, { quant: "q8_0" });
    await fetchModelFile({ ...source, token: "hf_secret" }, REF, { quant: "q4_0" });
    const api = hub.seen.filter((r) => r.origin === "hub");
    assert(api.length >= 4, "listings and HEADs");
    assert(api.every((r) => r.authorization === "Bearer hf_secret"), "hub calls carry the token");
    const storage = hub.seen.filter((r) => r.origin !== "hub");
    assertEquals(storage.map((r) => [r.origin, r.authorization]), [["cdn", null], ["xet", null]]);
  });
});
