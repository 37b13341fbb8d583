/**
 * A hub for tests, in-process on loopback ports, that behaves as the real Hugging Face Hub
 * does (its documented headers and captures of its answers), on three origins:
 * - the hub: `/api/models/{org}/{name}/revision/{rev}` (sha, siblings) and
 *   `/{org}/{name}/resolve/{rev}/{file}`, answering small files itself (`ETag`) and LFS and
 *   Xet files with a 302 to a signed URL and `X-Repo-Commit`, `X-Linked-Etag`,
 *   `X-Linked-Size` (Xet files add `X-Xet-Hash`); refusals with `X-Error-Code`,
 *   `X-Error-Message` and a JSON `error` body, 429 with `Retry-After` and `RateLimit`;
 * - the LFS CDN and the Xet bridge (fake_storage.ts): signed URLs that expire, Range.
 * Tests can cut, stall and throttle downloads, make the hub refuse or fail, advertise a
 * wrong sha256, and read every request each origin saw.
 */

import { createHash } from "node:crypto";
import { checkSignature, serveBytes, signedUrl, type Trouble } from "./fake_storage.ts";

export interface HubFile {
  /** Path inside the repository. */
  name: string;
  bytes: Uint8Array<ArrayBuffer>;
  /** LFS files are redirected to the CDN and carry X-Linked-*; others are served directly. */
  lfs: boolean;
  /** Stored with Xet: redirected to the Xet bridge instead of the CDN. */
  xet?: boolean;
}

export interface HubRepo {
  id: string;
  /** The commit `main` points to, and its files. */
  commit: string;
  files: HubFile[];
  /** Other branches and tags: the commit each points to, with its files. */
  refs?: Record<string, { commit: string; files: HubFile[] }>;
}

export type Origin = "hub" | "cdn" | "xet";

export interface SeenRequest {
  origin: Origin;
  method: string;
  path: string;
  query: string;
  range: string | null;
  authorization: string | null;
}

/** How the hub turns requests away, as the real one does (status, X-Error-Code, message). */
export type Refusal = "private" | "gated" | "gone" | "rate_limited" | "unavailable";

export interface FakeHubOptions {
  port?: number;
  /** Lifetime of the signed download URLs (the real hub's: an hour; negative: expired). */
  expirySecs?: number;
  /** The Xet bridge refuses unranged GETs of objects larger than this. */
  xetUnrangedLimit?: number;
}

export interface FakeHub {
  url: string;
  cdnUrl: string;
  xetUrl: string;
  seen: SeenRequest[];
  cutNextDownload(file: string, afterBytes: number): void;
  stallNextDownload(file: string, afterBytes: number): void;
  /** Advertise this sha256 for a file instead of the real one. */
  lieAboutSha(file: string, sha: string): void;
  /** Send downloads in pieces of `chunk` bytes, `delayMs` apart (0 = all at once). */
  throttle(chunk: number, delayMs: number): void;
  /** The next `times` requests to the hub's own origin are refused so. */
  refuse(refusal: Refusal, times?: number, retryAfterSecs?: number): void;
  stop(): Promise<void>;
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function gitSha1(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

/** The real hub's answers to each refusal (captured headers and bodies). */
function refusalResponse(refusal: Refusal, repo: string, retryAfter: number): Response {
  const answer = (status: number, code: string | null, message: string, extra = {}) =>
    new Response(JSON.stringify({ error: message }), {
      status,
      headers: {
        "content-type": "application/json; charset=utf-8",
        "x-error-message": message,
        ...(code ? { "x-error-code": code } : {}),
        ...extra,
      },
    });
  switch (refusal) {
    case "private":
      return answer(401, "RepoNotFound", "Invalid username or password.");
    case "gated":
      return answer(
        403,
        "GatedRepo",
        `Access to model ${repo} is restricted and you are not in the authorized list. ` +
          `Visit https://huggingface.co/${repo} to ask for access.`,
      );
    case "gone":
      return answer(404, "RepoNotFound", "Repository not found");
    case "rate_limited":
      return answer(
        429,
        null,
        "We had to rate limit your IP. To continue using our service, create a HF account " +
          "or login to your existing account, and make sure you pass a HF_TOKEN if you're using the API.",
        {
          "retry-after": String(retryAfter),
          ratelimit: `"api";r=0;t=${retryAfter}`,
          "ratelimit-policy": '"fixed window";"api";q=500;w=300',
        },
      );
    case "unavailable":
      return new Response("<html><body>503 Service Temporarily Unavailable</body></html>", {
        status: 503,
        headers: { "content-type": "text/html" },
      });
  }
}

function serve(port: number, handler: (req: Request) => Response | Promise<Response>) {
  return Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, handler);
}

export function startFakeHub(repos: HubRepo[], options: FakeHubOptions = {}): FakeHub {
  const expirySecs = options.expirySecs ?? 3600;
  const seen: SeenRequest[] = [];
  const trouble: Trouble = { cuts: new Map(), stalls: new Map(), pace: { chunk: 0, delayMs: 0 } };
  const lies = new Map<string, string>();
  const refusals: { refusal: Refusal; left: number; retryAfter: number }[] = [];
  const shas = new Map<HubFile, string>();
  const all = repos.flatMap((r) => [r.files, ...Object.values(r.refs ?? {}).map((x) => x.files)]);
  for (const f of all.flat()) shas.set(f, f.lfs ? sha256(f.bytes) : gitSha1(f.bytes));
  const blobs = new Map<string, HubFile>();
  for (const f of all.flat()) if (f.lfs) blobs.set(sha256(f.bytes), f);

  const record = (origin: Origin, req: Request): URL => {
    const url = new URL(req.url);
    seen.push({
      origin,
      method: req.method,
      path: decodeURIComponent(url.pathname),
      query: url.search,
      range: req.headers.get("range"),
      authorization: req.headers.get("authorization"),
    });
    return url;
  };
  /** The commit and files a revision (branch, tag or commit) names. */
  const at = (repo: HubRepo, rev: string) => {
    if (rev === "main" || rev === repo.commit) return { commit: repo.commit, files: repo.files };
    return Object.entries(repo.refs ?? {}).find(([name, r]) => name === rev || r.commit === rev)
      ?.[1];
  };
  const notFound = (code: string, message: string) =>
    new Response(JSON.stringify({ error: message }), {
      status: 404,
      headers: {
        "content-type": "application/json",
        "x-error-code": code,
        "x-error-message": message,
      },
    });

  const hub = (req: Request): Response => {
    const url = record("hub", req);
    const path = decodeURIComponent(url.pathname);
    const refusal = refusals[0];
    if (refusal) {
      if (--refusal.left <= 0) refusals.shift();
      const repo = /^\/(?:api\/models\/)?([^/]+\/[^/]+)/.exec(path)?.[1] ?? "";
      return refusalResponse(refusal.refusal, repo, refusal.retryAfter);
    }
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path);
    if (m) {
      const repo = repos.find((r) => r.id === m![1]);
      if (!repo) return notFound("RepoNotFound", "Repository not found");
      const rev = at(repo, m[2]);
      if (!rev) return notFound("RevisionNotFound", `Invalid rev id: ${m[2]}`);
      return Response.json({
        id: repo.id,
        sha: rev.commit,
        siblings: rev.files.map((f) => ({ rfilename: f.name })),
      });
    }
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (m) {
      const repo = repos.find((r) => r.id === m![1]);
      if (!repo) return notFound("RepoNotFound", "Repository not found");
      const rev = at(repo, m[2]);
      if (!rev) return notFound("RevisionNotFound", `Invalid rev id: ${m[2]}`);
      const file = rev.files.find((f) => f.name === m![3]);
      if (!file) return notFound("EntryNotFound", `${m[3]} does not exist on "${m[2]}"`);
      const etag = lies.get(file.name) ?? shas.get(file)!;
      const headers: Record<string, string> = { "x-repo-commit": rev.commit };
      if (!file.lfs) {
        headers.etag = `"${etag}"`;
        headers["content-length"] = String(file.bytes.length);
        return new Response(req.method === "HEAD" ? null : file.bytes, { headers });
      }
      headers["x-linked-etag"] = `"${etag}"`;
      headers["x-linked-size"] = String(file.bytes.length);
      const sha = sha256(file.bytes);
      if (file.xet) {
        headers["x-xet-hash"] = sha;
        headers.location = signedUrl(xetUrl, `/xet-bridge-us/${sha}`, expirySecs, true);
      } else {
        headers.location = signedUrl(cdnUrl, `/repos/${repo.id}/${sha}`, expirySecs, false);
      }
      return new Response(null, { status: 302, headers });
    }
    return new Response("no route", { status: 404 });
  };

  const storage = (origin: "cdn" | "xet") => (req: Request): Response => {
    const url = record(origin, req);
    const denied = checkSignature(url, origin === "xet");
    if (denied) return denied;
    const file = blobs.get(url.pathname.slice(url.pathname.lastIndexOf("/") + 1));
    if (!file) return new Response("no such object", { status: 404 });
    const limit = origin === "xet" ? (options.xetUnrangedLimit ?? 1 << 20) : null;
    return serveBytes(req, file, trouble, limit);
  };

  const servers = [
    serve(options.port ?? 0, hub),
    serve(0, storage("cdn")),
    serve(0, storage("xet")),
  ];
  // The CDN is reached as "localhost", another origin than the hub's 127.0.0.1, as a real
  // CDN's host differs from the hub's.
  const cdnUrl = `http://localhost:${servers[1].addr.port}`;
  const xetUrl = `http://localhost:${servers[2].addr.port}`;
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${servers[0].addr.port}`,
    cdnUrl,
    xetUrl,
    seen,
    cutNextDownload: (file, after) => trouble.cuts.set(file, after),
    stallNextDownload: (file, after) => trouble.stalls.set(file, after),
    lieAboutSha: (file, sha) => lies.set(file, sha),
    throttle: (chunk, delayMs) => Object.assign(trouble.pace, { chunk, delayMs }),
    refuse: (refusal, times = 1, retryAfter = 1) =>
      refusals.push({ refusal, left: times, retryAfter }),
    stop: () => {
      stopped ??= Promise.all(servers.map((s) => s.shutdown())).then(() => {});
      return stopped;
    },
  };
}
