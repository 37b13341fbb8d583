/**
 * A hub-compatible HTTP server for tests, in-process on a loopback port, with the routes
 * and headers of the real hub: `/api/models/{org}/{name}/revision/main` (sha, siblings),
 * `/{org}/{name}/resolve/{rev}/{file}` answering LFS files with a 302 to a CDN path and
 * `X-Repo-Commit`, `X-Linked-Etag`, `X-Linked-Size`, and the CDN path with `ETag`,
 * `Content-Length`, `Accept-Ranges` and `Range` support. Tests can cut a download short,
 * advertise a wrong sha256, and read what the server saw.
 */

import { createHash } from "node:crypto";

export interface HubFile {
  /** Path inside the repository. */
  name: string;
  bytes: Uint8Array<ArrayBuffer>;
  /** LFS files are redirected to the CDN and carry X-Linked-*; others are served directly. */
  lfs: boolean;
}

export interface HubRepo {
  id: string;
  commit: string;
  files: HubFile[];
}

export interface SeenRequest {
  method: string;
  path: string;
  range: string | null;
  authorization: string | null;
}

export interface FakeHub {
  url: string;
  seen: SeenRequest[];
  /** The next CDN GET of this file sends only this many bytes, then breaks the connection. */
  cutNextDownload(file: string, afterBytes: number): void;
  /** Advertise this sha256 for a file instead of the real one. */
  lieAboutSha(file: string, sha: string): void;
  /** Send downloads in pieces of `chunk` bytes, `delayMs` apart (0 = all at once). */
  throttle(chunk: number, delayMs: number): void;
  stop(): Promise<void>;
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function gitSha1(bytes: Uint8Array): string {
  return createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}

export function startFakeHub(repos: HubRepo[], port = 0): FakeHub {
  const seen: SeenRequest[] = [];
  const pace = { chunk: 0, delayMs: 0 };
  const cuts = new Map<string, number>();
  const lies = new Map<string, string>();
  const shas = new Map<HubFile, string>();
  for (const r of repos) {
    for (const f of r.files) shas.set(f, f.lfs ? sha256(f.bytes) : gitSha1(f.bytes));
  }

  const find = (id: string, name: string) => {
    const repo = repos.find((r) => r.id === id);
    return { repo, file: repo?.files.find((f) => f.name === name) };
  };
  const notFound = () =>
    new Response(JSON.stringify({ error: "Repository not found" }), {
      status: 404,
      headers: { "content-type": "application/json", "x-error-code": "RepoNotFound" },
    });

  const handler = (req: Request): Response => {
    const url = new URL(req.url);
    const path = decodeURIComponent(url.pathname);
    seen.push({
      method: req.method,
      path,
      range: req.headers.get("range"),
      authorization: req.headers.get("authorization"),
    });
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/main$/.exec(path);
    if (m) {
      const repo = repos.find((r) => r.id === m![1]);
      if (!repo) return notFound();
      return Response.json({
        id: repo.id,
        sha: repo.commit,
        siblings: repo.files.map((f) => ({ rfilename: f.name })),
      });
    }
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (m) {
      const { repo, file } = find(m[1], m[3]);
      if (!repo || !file || (m[2] !== repo.commit && m[2] !== "main")) return notFound();
      const etag = lies.get(file.name) ?? shas.get(file)!;
      const headers: Record<string, string> = { "x-repo-commit": repo.commit };
      if (!file.lfs) {
        headers.etag = `"${etag}"`;
        headers["content-length"] = String(file.bytes.length);
        return new Response(req.method === "HEAD" ? null : file.bytes, { headers });
      }
      headers["x-linked-etag"] = `"${etag}"`;
      headers["x-linked-size"] = String(file.bytes.length);
      // Another origin than the hub's, as a real CDN is: credentials must not follow.
      headers.location = `${cdnOrigin}/cdn/${repo.id}/${file.name}`;
      return new Response(null, { status: 302, headers });
    }
    m = /^\/cdn\/([^/]+\/[^/]+)\/(.+)$/.exec(path);
    if (m) {
      const { file } = find(m[1], m[2]);
      if (!file) return new Response("no such object", { status: 404 });
      return serveBytes(req, file, cuts, pace);
    }
    return new Response("no route", { status: 404 });
  };

  let cdnOrigin = "";
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port, signal: ac.signal, onListen: () => {} },
    handler,
  );
  cdnOrigin = `http://localhost:${server.addr.port}`;
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    cutNextDownload: (file, after) => cuts.set(file, after),
    lieAboutSha: (file, sha) => lies.set(file, sha),
    throttle: (chunk, delayMs) => Object.assign(pace, { chunk, delayMs }),
    stop: async () => {
      ac.abort();
      await server.finished;
    },
  };
}

function serveBytes(
  req: Request,
  file: HubFile,
  cuts: Map<string, number>,
  pace: { chunk: number; delayMs: number },
): Response {
  const total = file.bytes.length;
  const headers: Record<string, string> = {
    "accept-ranges": "bytes",
    etag: `"${sha256(file.bytes)}"`,
    "content-type": "application/octet-stream",
  };
  let start = 0;
  let status = 200;
  const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
  if (range) {
    start = Number(range[1]);
    if (start >= total) {
      return new Response(null, { status: 416, headers: { "content-range": `bytes */${total}` } });
    }
    status = 206;
    headers["content-range"] = `bytes ${start}-${total - 1}/${total}`;
  }
  headers["content-length"] = String(total - start);
  if (req.method === "HEAD") return new Response(null, { status, headers });
  const cut = cuts.get(file.name);
  if (cut === undefined && pace.chunk > 0) {
    let at = start;
    const slow = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await new Promise((r) => setTimeout(r, pace.delayMs));
        controller.enqueue(file.bytes.slice(at, at + pace.chunk));
        at += pace.chunk;
        if (at >= total) controller.close();
      },
    });
    return new Response(slow, { status, headers });
  }
  if (cut === undefined) return new Response(file.bytes.subarray(start), { status, headers });
  cuts.delete(file.name);
  const part = file.bytes.subarray(start, start + cut);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      controller.enqueue(part);
      await new Promise((r) => setTimeout(r, 20));
      controller.error(new Error("connection cut by the test"));
    },
  });
  return new Response(body, { status, headers });
}
