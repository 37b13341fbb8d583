/**
 * The two hub calls that come before a download, as huggingface_hub makes them: the
 * repository listing at a revision (`/api/models/{repo}/revision/{rev}`: commit and file
 * names) and a HEAD of the file's resolve URL without following redirects (commit, etag,
 * size, and where the bytes are: the hub answers LFS and Xet files with a redirect to a
 * signed URL on its CDN or Xet bridge, valid for about an hour).
 */

import { errorMessage } from "../common/errors.ts";
import { HubError } from "./errors.ts";
import { type HubCall, hubFetch } from "./http.ts";
import { repoName, revisionOf } from "./model_ref.ts";

const METADATA_TIMEOUT_MS = 30_000;
const MAX_REDIRECTS = 5;

export interface RepoListing {
  commit: string;
  files: string[];
}

export interface FileMeta {
  /** Blob name in the cache: the LFS sha256, else the git etag. */
  etag: string;
  /** The sha256 the hub advertises, when it does (LFS and Xet files). */
  sha256: string | null;
  size: number;
  /** Where to GET the bytes (a signed CDN or Xet bridge URL when the hub redirects). */
  url: string;
}

function segments(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

function timeout(call: HubCall): () => AbortSignal {
  return () => {
    const t = AbortSignal.timeout(METADATA_TIMEOUT_MS);
    return call.signal ? AbortSignal.any([call.signal, t]) : t;
  };
}

export async function listRepo(call: HubCall): Promise<RepoListing> {
  const repo = repoName(call.ref);
  const url = `${call.source.endpoint}/api/models/${segments(repo)}/revision/${
    encodeURIComponent(revisionOf(call.ref))
  }`;
  const res = await hubFetch(call, url, {}, timeout(call));
  let body: unknown;
  try {
    body = await res.json();
  } catch (err) {
    throw new HubError("hub_error", `listing ${repo}: not JSON: ${errorMessage(err)}`);
  }
  const b = body as { sha?: unknown; siblings?: unknown };
  if (typeof b.sha !== "string" || !Array.isArray(b.siblings)) {
    throw new HubError("hub_error", `listing ${repo}: no sha or siblings in the answer`);
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

export async function fileMeta(call: HubCall, commit: string, file: string): Promise<FileMeta> {
  const { endpoint } = call.source;
  let url = `${endpoint}/${segments(repoName(call.ref))}/resolve/${commit}/${segments(file)}`;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const res = await hubFetch(call, url, { method: "HEAD", redirect: "manual" }, timeout(call));
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
