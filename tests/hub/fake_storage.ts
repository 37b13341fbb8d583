/**
 * The two places the real hub sends downloads to, for the fake hub: an LFS CDN (CloudFront
 * signed URLs: `Expires`, `Policy`, `Signature`, `Key-Pair-Id`) and the Xet bridge (S3
 * presigned `X-Amz-*` parameters plus CloudFront's). Each is its own origin, so credentials
 * must not follow a redirect there. A URL is checked when a request starts: past its expiry
 * or with a wrong signature it is refused with 403 and the XML body those services send; a
 * transfer already running goes on. They serve `Range` (206, 416), and the Xet bridge
 * refuses unranged GETs of large files. Downloads can be cut, stalled and throttled.
 */

import { createHmac } from "node:crypto";
import type { HubFile } from "./fake_hub.ts";

const SECRET = "fake-cdn-signing-key";

export interface Pace {
  chunk: number;
  delayMs: number;
}

export interface Trouble {
  /** The next GET of a file sends this many bytes, then breaks the connection. */
  cuts: Map<string, number>;
  /** The next GET of a file sends this many bytes, then sends nothing more. */
  stalls: Map<string, number>;
  pace: Pace;
}

function sign(path: string, expires: number): string {
  return createHmac("sha256", SECRET).update(`${path}\n${expires}`).digest("base64url");
}

/** A signed URL for `path` on `origin`, valid for `expirySecs` from now. */
export function signedUrl(origin: string, path: string, expirySecs: number, xet: boolean): string {
  const expires = Math.ceil(Date.now() / 1000) + expirySecs;
  const policy = btoa(JSON.stringify({ Statement: [{ Resource: `${origin}${path}` }] }));
  const q = new URLSearchParams();
  if (xet) {
    q.set("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
    q.set("X-Amz-Credential", "AKIAFAKE/20250101/us-east-1/s3/aws4_request");
    q.set("X-Amz-Expires", String(expirySecs));
    q.set("X-Amz-Signature", sign(`amz${path}`, expires));
  }
  q.set("Expires", String(expires));
  q.set("Policy", policy);
  q.set("Signature", sign(path, expires));
  q.set("Key-Pair-Id", "KFAKEKEYPAIR");
  return `${origin}${path}?${q}`;
}

function refused(xet: boolean, why: string): Response {
  const body = xet
    ? `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>${why}</Message></Error>`
    : `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access denied</Message></Error>`;
  return new Response(body, { status: 403, headers: { "content-type": "application/xml" } });
}

/** Whether the request's signature is good and not expired; the refusal when not. */
export function checkSignature(url: URL, xet: boolean): Response | null {
  const expires = Number(url.searchParams.get("Expires"));
  const signature = url.searchParams.get("Signature");
  if (!signature || signature !== sign(url.pathname, expires)) {
    return refused(
      xet,
      "The request signature we calculated does not match the signature you provided",
    );
  }
  if (Date.now() / 1000 >= expires) return refused(xet, "Request has expired");
  return null;
}

/** The file's bytes as a CDN serves them, with `Range`, and the trouble the test asked for. */
export function serveBytes(
  req: Request,
  file: HubFile,
  trouble: Trouble,
  unrangedLimit: number | null,
): Response {
  const total = file.bytes.length;
  const headers: Record<string, string> = {
    "accept-ranges": "bytes",
    "content-type": "application/octet-stream",
  };
  const header = req.headers.get("range");
  if (header === null && unrangedLimit !== null && total > unrangedLimit) {
    return Response.json(
      { error: `a Range header is required for objects larger than ${unrangedLimit} bytes` },
      { status: 400 },
    );
  }
  let start = 0;
  let status = 200;
  const range = /^bytes=(\d+)-$/.exec(header ?? "");
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
  const cut = trouble.cuts.get(file.name);
  const stall = trouble.stalls.get(file.name);
  trouble.cuts.delete(file.name);
  trouble.stalls.delete(file.name);
  const end = Math.min(total, start + (cut ?? stall ?? total));
  const { chunk, delayMs } = trouble.pace;
  let at = start;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (at >= end) {
        if (cut !== undefined) {
          await new Promise((r) => setTimeout(r, 20));
          controller.error(new Error("connection cut by the test"));
        } else if (stall !== undefined) {
          // Nothing more until the client gives up on us.
          await new Promise((r) => req.signal.addEventListener("abort", r, { once: true }));
          controller.close();
        } else controller.close();
        return;
      }
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      const n = chunk > 0 ? chunk : end - at;
      controller.enqueue(file.bytes.slice(at, Math.min(end, at + n)));
      at = Math.min(end, at + n);
    },
  });
  return new Response(body, { status, headers });
}
