/**
 * The cache shared with huggingface_hub, both ways: a cache written by hand exactly as that
 * library writes one (blobs named by sha256, relative snapshot symlinks, refs without a
 * newline, .locks, a tag under refs/) is read by neuron, offline and online without
 * downloading; what neuron writes resolves as huggingface_hub's try_to_load_from_cache
 * resolves it (ref -> commit -> snapshot symlink -> blob). Revisions are recorded under
 * refs/ (a commit is not). A group-writable cache gets group-writable files.
 */
import { captureLogs } from "../../src/common/log.ts";
import { fetchModelFile, parseRepoRef } from "../../src/hub/mod.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { type HubRepo, sha256 } from "./fake_hub.ts";
import { COMMIT, Q4, Q8, REF, REPO, REPO_DIR, withHub } from "./support.ts";

captureLogs(() => {});

const V1 = "89abcdef0123456789abcdef0123456789abcdef";
const TAGGED: HubRepo = {
  ...REPO,
  refs: { v1: { commit: V1, files: [{ name: "old-Q4_0.gguf", bytes: Q4, lfs: true }] } },
};

/** huggingface_hub's try_to_load_from_cache, step by step, as that library does it. */
async function hfResolve(cache: string, repo: string, file: string, revision = "main") {
  const folder = `${cache}/models--${repo.replace("/", "--")}`;
  let commit = revision;
  try {
    commit = await Deno.readTextFile(`${folder}/refs/${revision}`);
  } catch {
    // a commit given as the revision has no ref
  }
  const path = `${folder}/snapshots/${commit}/${file}`;
  const target = await Deno.readLink(path);
  assert(!target.startsWith("/"), "relative symlink");
  return { commit, path, blob: await Deno.realPath(path) };
}

/** A cache as huggingface_hub's hf_hub_download leaves it. */
async function writeHfCache(cache: string): Promise<void> {
  const dir = `${cache}/${REPO_DIR}`;
  await Deno.mkdir(`${dir}/blobs`, { recursive: true });
  await Deno.mkdir(`${dir}/snapshots/${COMMIT}/q4`, { recursive: true });
  await Deno.mkdir(`${dir}/refs`, { recursive: true });
  await Deno.mkdir(`${cache}/.locks/${REPO_DIR}`, { recursive: true });
  await Deno.writeFile(`${dir}/blobs/${sha256(Q4)}`, Q4);
  await Deno.writeTextFile(`${cache}/.locks/${REPO_DIR}/${sha256(Q4)}.lock`, "");
  await Deno.symlink(
    `../../../blobs/${sha256(Q4)}`,
    `${dir}/snapshots/${COMMIT}/q4/qwen3-tiny-Q4_0.gguf`,
  );
  await Deno.writeTextFile(`${dir}/refs/main`, COMMIT);
  await Deno.writeTextFile(
    `${cache}/CACHEDIR.TAG`,
    "Signature: 8a477f597d28d172789f06886806bc55\n",
  );
}

Deno.test("interop: a cache written as huggingface_hub writes it is read offline and online", async () => {
  await withHub(async (hub, source) => {
    await writeHfCache(source.cacheDir);
    const offline = await fetchModelFile({ ...source, offline: true }, REF, { quant: "q4_0" });
    assertEquals([offline.file, offline.commit, offline.cached], [
      "q4/qwen3-tiny-Q4_0.gguf",
      COMMIT,
      true,
    ]);
    assertEquals(sha256(await Deno.readFile(offline.path)), sha256(Q4));
    const online = await fetchModelFile(source, REF, { quant: "q4_0" });
    assertEquals(online.path, offline.path);
    assertEquals(hub.seen.filter((r) => r.origin !== "hub"), [], "nothing downloaded");
  });
});

Deno.test("interop: what neuron writes resolves as huggingface_hub resolves it", async () => {
  await withHub(async (_hub, source) => {
    await fetchModelFile(source, REF, { quant: "q8_0" });
    const got = await hfResolve(source.cacheDir, REPO.id, "qwen3-tiny-Q8_0.gguf");
    assertEquals(got.commit, COMMIT);
    assertEquals(got.blob.slice(got.blob.lastIndexOf("/") + 1), sha256(Q8));
    assertEquals(sha256(await Deno.readFile(got.blob)), sha256(Q8));
    // A file the library would fetch itself (the README) is not there: it would be fetched.
    assertEquals(await hfResolve(source.cacheDir, REPO.id, "README.md").catch(() => null), null);
  });
});

Deno.test("revisions: a tag is downloaded at its commit and recorded under refs/; a commit is not", async () => {
  await withHub(async (hub, source) => {
    const tagged = await fetchModelFile(source, parseRepoRef(`${REPO.id}@v1`), { quant: "q4_0" });
    assertEquals([tagged.file, tagged.commit], ["old-Q4_0.gguf", V1]);
    assertEquals(hub.seen[0].path, `/api/models/${REPO.id}/revision/v1`);
    const dir = `${source.cacheDir}/${REPO_DIR}`;
    assertEquals(await Deno.readTextFile(`${dir}/refs/v1`), V1);
    assertEquals(await Deno.stat(`${dir}/refs/main`).catch(() => null), null, "main untouched");
    const viaHf = await hfResolve(source.cacheDir, REPO.id, "old-Q4_0.gguf", "v1");
    assertEquals(viaHf.path, tagged.path);
    // Offline, the tag is read back through refs/v1; main is not in the cache.
    const offline = await fetchModelFile(
      { ...source, offline: true },
      parseRepoRef(`${REPO.id}@v1`),
      {
        quant: "q4_0",
      },
    );
    assertEquals(offline.path, tagged.path);
    // A commit as the revision: resolved as itself, and no ref named after it.
    const pinned = await fetchModelFile(source, parseRepoRef(`${REPO.id}@${COMMIT}`), {
      quant: "q8_0",
    });
    assertEquals(pinned.commit, COMMIT);
    const refs = await Array.fromAsync(Deno.readDir(`${dir}/refs`));
    assertEquals(refs.map((r) => r.name), ["v1"]);
  }, [TAGGED]);
});

Deno.test("shared caches: in a group-writable cache, blobs, locks, refs and folders are group-writable", async () => {
  await withHub(async (_hub, source) => {
    await Deno.chmod(source.cacheDir, 0o2775);
    await fetchModelFile(source, REF, { quant: "q8_0" });
    const dir = `${source.cacheDir}/${REPO_DIR}`;
    const paths = [
      `${dir}/blobs/${sha256(Q8)}`,
      `${source.cacheDir}/.locks/${REPO_DIR}/${sha256(Q8)}.lock`,
      `${dir}/refs/main`,
      dir,
      `${dir}/blobs`,
      `${dir}/snapshots/${COMMIT}`,
      `${source.cacheDir}/.locks/${REPO_DIR}`,
    ];
    for (const path of paths) {
      const mode = (await Deno.stat(path)).mode! & 0o777;
      assertEquals(mode & 0o060, 0o060, `${path}: ${mode.toString(8)}`);
    }
  });
});
