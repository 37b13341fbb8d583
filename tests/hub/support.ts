/** What the hub suites share: the fixture repository, a hub and an empty cache per test. */

import { fetchModelFile, type FetchOptions, HubError, type HubSource } from "../../src/hub/mod.ts";
import type { ModelFile } from "../../src/hub/mod.ts";
import { fixture } from "../fixtures.ts";
import { assertEquals, assertRejects } from "../support/assert.ts";
import { type FakeHub, type FakeHubOptions, type HubRepo, startFakeHub } from "./fake_hub.ts";

export const COMMIT = "0123456789abcdef0123456789abcdef01234567";
export const Q8 = Deno.readFileSync(fixture("qwen3-tiny-q8_0.gguf"));
export const Q4 = Deno.readFileSync(fixture("qwen3-tiny-q4_0.gguf"));
export const README = new TextEncoder().encode("# tiny\n");
export const REPO: HubRepo = {
  id: "test-org/Tiny-GGUF",
  commit: COMMIT,
  files: [
    { name: "README.md", bytes: README, lfs: false },
    { name: "qwen3-tiny-Q8_0.gguf", bytes: Q8, lfs: true },
    { name: "q4/qwen3-tiny-Q4_0.gguf", bytes: Q4, lfs: true, xet: true },
  ],
};
export const REF = { scheme: null, org: "test-org", name: "Tiny-GGUF" };
export const REPO_DIR = "models--test-org--Tiny-GGUF";

/** Retries that do not make a test wait: 10 ms backoff, 2 s in all. */
export const QUICK_RETRY: FetchOptions["retry"] = {
  firstDelayMs: 10,
  maxDelayMs: 50,
  budgetMs: 2_000,
};

export async function withHub(
  fn: (hub: FakeHub, source: HubSource) => Promise<void>,
  repos: HubRepo[] = [REPO],
  options: FakeHubOptions = {},
): Promise<void> {
  const hub = startFakeHub(repos, options);
  const cacheDir = await Deno.makeTempDir({ prefix: "neuron-hub-" });
  try {
    await fn(hub, { scheme: "hf", endpoint: hub.url, cacheDir, offline: false });
  } finally {
    await hub.stop();
    await Deno.remove(cacheDir, { recursive: true });
  }
}

export function fetchQuick(
  source: HubSource,
  quant: string,
  opts: FetchOptions = {},
  ref: typeof REF & { revision?: string } = REF,
): Promise<ModelFile> {
  return fetchModelFile(source, ref, { quant, retry: QUICK_RETRY, ...opts });
}

export async function hubError(fn: () => Promise<unknown>, code: string): Promise<HubError> {
  const err = await assertRejects(fn, HubError);
  assertEquals(err.code, code, err.message);
  return err;
}

/** Deterministic bytes that compress to nothing (a stand-in for a large weights file). */
export function noise(n: number, seed = 1): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
