/**
 * Pieces of a byte-for-byte HTTP proxy: which headers cross, and a body pass-through that
 * pulls from upstream only when the client reads (no buffering) and tells the caller when
 * the exchange is over, however it ends.
 */

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

function filtered(headers: Headers, drop: Set<string>): Headers {
  const out = new Headers();
  const listed = (headers.get("connection") ?? "").toLowerCase().split(",").map((s) => s.trim());
  for (const [name, value] of headers) {
    if (HOP_BY_HOP.has(name) || drop.has(name) || listed.includes(name)) continue;
    out.append(name, value);
  }
  return out;
}

/**
 * The body sent upstream is the one the server decoded (a client's gzip is undone before
 * routing, and upstreams such as vLLM cannot read a compressed request), so its encoding
 * and length headers no longer apply.
 */
const REQUEST_DROP = new Set(["host", "content-length", "content-encoding", "accept-encoding"]);

/**
 * Headers to send upstream. Compression is refused: with `identity` asked for, fetch hands
 * over the bytes exactly as the upstream sent them (with `gzip` asked for, it would inflate
 * them yet keep the `content-encoding` header, and the client would inflate them again).
 */
export function upstreamRequestHeaders(incoming: Headers): Headers {
  const out = filtered(incoming, REQUEST_DROP);
  out.set("accept-encoding", "identity");
  return out;
}

/**
 * Headers to relay back. The length is recomputed by our own server. `content-encoding`
 * stays: an upstream that compresses despite `identity` reaches us still compressed, and the
 * header is what tells the client so.
 */
export function clientResponseHeaders(upstream: Headers): Headers {
  return filtered(upstream, new Set(["content-length"]));
}

/** `body`, relayed chunk by chunk; `done` runs once when it ends, fails or is cancelled. */
export function passThrough(
  body: ReadableStream<Uint8Array> | null,
  done: () => void,
): ReadableStream<Uint8Array> | null {
  if (!body) {
    done();
    return null;
  }
  const reader = body.getReader();
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    done();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller): Promise<void> {
      try {
        const chunk = await reader.read();
        if (chunk.done) {
          finish();
          controller.close();
        } else {
          controller.enqueue(chunk.value);
        }
      } catch (err) {
        finish();
        controller.error(err);
      }
    },
    async cancel(reason): Promise<void> {
      finish();
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
