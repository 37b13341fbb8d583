/**
 * The two hub calls that come before a download, as huggingface_hub makes them: the
 * repository listing at a revision (`/api/models/{repo}/revision/{rev}`: commit and file
 * names) and a HEAD of the file's resolve URL without following redirects (commit, etag,
 * size, and where the bytes are: the hub answers LFS files with a redirect to its CDN).
 */

import { errorMessage } from "../common/errors.ts";
import { HubError } from "./errors.ts";
import { repoName, type RepoRef } from "./model_ref.ts";
import type { HubSource } from "./sources.ts";

const METADATA_TIMEOUT_MS = 30_000;
const MAX_REDIRECTS = 5;

export interface RepoListing {
  commit: string;
  files: string[];
}

export interface FileMeta {
  /** Blob name in the cache: the LFS sha256, else the git etag. */
  etag: string;
  /** The sha256 the hub advertises, when it does (LFS files). */
  sha256: string | null;
  size: number;
  /** Where to GET the bytes (the CDN location when the hub redirects). */
  url: string;
}

function segments(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

export function authHeaders(source: HubSource, url: string): Record<string, string> {
  if (!source.token) return {};
  // The token is the hub's; a CDN or another host never sees it.
  return new URL(url).origin === new URL(source.endpoint).origin
    ? { authorization: `Bearer ${source.token}` }
    : {};
}

/** fetch, with network failures and failure statuses as HubErrors. */
export async function hubFetch(
  source: HubSource,
  ref: RepoRef,
  url: string,
  init: RequestInit & { signal?: AbortSignal },
  what: string,
): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, {
      ...init,
      headers: { ...authHeaders(source, url), ...(init.headers as Record<string, string>) },
    });
  } catch (err) {
    throw new HubError(
      "hub_unreachable",
      `${what}: cannot reach ${source.endpoint}: ${errorMessage(err)}`,
      { cause: err },
    );
  }
  if (res.ok || (res.status >= 300 && res.status < 400) || res.status === 416) return res;
  await res.body?.cancel();
  const repo = repoName(ref);
  const code = res.headers.get("x-error-code");
  if (res.status === 404 || code === "RepoNotFound") {
    throw new HubError("repo_not_found", `${what}: ${repo} was not found on ${source.endpoint}`);
  }
  if (res.status === 401 || res.status === 403) {
    throw new HubError(
      "hub_unauthorized",
      `${what}: ${source.endpoint} refused access to ${repo} (HTTP ${res.status}); ` +
        `gated or private repositories need a token (${
          source.scheme === "hf" ? "HF_TOKEN" : "auth_env"
        })`,
    );
  }
  if (res.status === 429 || res.status >= 500) {
    throw new HubError(
      "hub_unreachable",
      `${what}: ${source.endpoint} answered HTTP ${res.status}`,
    );
  }
  throw new HubError("hub_error", `${what}: ${source.endpoint} answered HTTP ${res.status}`);
}

function timeout(signal?: AbortSignal): AbortSignal {
  const t = AbortSignal.timeout(METADATA_TIMEOUT_MS);
  return signal ? AbortSignal.any([signal, t]) : t;
}

export async function listRepo(
  source: HubSource,
  ref: RepoRef,
  signal?: AbortSignal,
): Promise<RepoListing> {
  const url = `${source.endpoint}/api/models/${segments(repoName(ref))}/revision/main`;
  const res = await hubFetch(source, ref, url, { signal: timeout(signal) }, "listing");
  let body: unknown;
  try {
    body = await res.json();
  } catch (err) {
    throw new HubError("hub_error", `listing ${repoName(ref)}: not JSON: ${errorMessage(err)}`);
  }
  const b = body as { sha?: unknown; siblings?: unknown };
  if (typeof b.sha !== "string" || !Array.isArray(b.siblings)) {
    throw new HubError("hub_error", `listing ${repoName(ref)}: no sha or siblings in the answer`);
  }
  const files = b.siblings
    .map((s) => (s as { rfilename?: unknown }).rfilename)
    .filter((f): f is string => typeof f === "string" && !f.split("/").includes(".."));
  return { commit: b.sha, files };
}

function cleanEtag(v: string | null): string | null {
  if (!v) return null;
  return v.replace(/^W\//, "").replace(/^"|"$/g, "") || null;
}

export async function fileMeta(
  source: HubSource,
  ref: RepoRef,
  commit: string,
  file: string,
  signal?: AbortSignal,
): Promise<FileMeta> {
  let url = `${source.endpoint}/${segments(repoName(ref))}/resolve/${commit}/${segments(file)}`;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const res = await hubFetch(
      source,
      ref,
      url,
      { method: "HEAD", redirect: "manual", signal: timeout(signal) },
      `resolving ${file}`,
    );
    await res.body?.cancel();
    const h = res.headers;
    const linked = cleanEtag(h.get("x-linked-etag"));
    const location = h.get("location");
    const redirect = res.status >= 300 && res.status < 400 && location;
    // A redirect without file metadata is a moved repository: ask again over there.
    if (redirect && !linked) {
      url = new URL(location, url).href;
      continue;
    }
    const etag = linked ?? cleanEtag(h.get("etag"));
    const size = Number(h.get("x-linked-size") ?? h.get("content-length") ?? NaN);
    if (!etag || !Number.isFinite(size)) {
      throw new HubError("hub_error", `resolving ${file}: the hub sent no etag or size`);
    }
    return {
      etag,
      sha256: /^[0-9a-f]{64}$/.test(etag) ? etag : null,
      size,
      url: redirect ? new URL(location, url).href : url,
    };
  }
  throw new HubError("hub_error", `resolving ${file}: more than ${MAX_REDIRECTS} redirects`);
}
