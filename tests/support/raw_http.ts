/**
 * Tools for the HTTP server's tests (tests/server/http_test.ts, http_connections_test.ts): a
 * server on a free loopback port, and a raw client socket that writes bytes as given and
 * keeps what it reads, since fetch would hide the framing, pipelining and refusals those
 * tests look at. Every wait has a hang guard.
 */
import { captureLogs } from "../../src/common/log.ts";
import { HttpServer, type HttpServerOptions } from "../../src/http/mod.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How long a wait on the server may take before the test fails instead of hanging. */
export const GUARD_MS = 20_000;

/** Runs `fn` with a server on a free loopback port (logs muted), then closes and drains it. */
export async function withServer(
  opts: Partial<HttpServerOptions>,
  fn: (server: HttpServer) => Promise<void>,
): Promise<void> {
  const restore = captureLogs(() => {});
  const server = new HttpServer({
    hostname: "127.0.0.1",
    port: 0,
    headerTimeoutMs: 10_000,
    idleTimeoutMs: 60_000,
    maxConnections: 64,
    handler: () => new Response("ok"),
    onError: () => new Response("handler failed", { status: 500 }),
    ...opts,
  });
  try {
    await fn(server);
  } finally {
    server.closeAll();
    await server.drain();
    restore();
  }
}

/** A raw client socket that keeps what it has read. */
export class Raw {
  text = "";
  ended = false;
  #reading: Promise<void> | null = null;

  private constructor(readonly conn: Deno.TcpConn) {}

  static async open(server: { addr: { port: number } } | { port: number }): Promise<Raw> {
    const port = "addr" in server ? server.addr.port : server.port;
    return new Raw(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  async send(text: string | Uint8Array): Promise<void> {
    const bytes = typeof text === "string" ? encoder.encode(text) : text;
    for (let at = 0; at < bytes.length;) at += await this.conn.write(bytes.subarray(at));
  }

  #readOnce(): Promise<void> {
    this.#reading ??= (async () => {
      const buf = new Uint8Array(64 * 1024);
      let n: number | null = null;
      try {
        n = await this.conn.read(buf);
      } catch {
        n = null;
      }
      if (n === null) this.ended = true;
      else this.text += decoder.decode(buf.subarray(0, n));
    })().finally(() => (this.#reading = null));
    return this.#reading;
  }

  /** Reads until `pred` holds for what arrived (or the server closed). */
  async until(pred: (text: string) => boolean, what = "data"): Promise<string> {
    const deadline = Date.now() + GUARD_MS;
    while (!pred(this.text)) {
      if (this.ended) throw new Error(`closed before ${what}; got ${JSON.stringify(this.text)}`);
      if (Date.now() > deadline) throw new Error(`no ${what} within ${GUARD_MS} ms`);
      await Promise.race([this.#readOnce(), new Promise((r) => setTimeout(r, 200))]);
    }
    return this.text;
  }

  /** Reads until the server closes. */
  async end(): Promise<string> {
    const deadline = Date.now() + GUARD_MS;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error(`still open after ${GUARD_MS} ms`);
      await Promise.race([this.#readOnce(), new Promise((r) => setTimeout(r, 200))]);
    }
    return this.text;
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // closed
    }
  }
}

/** How many times `part` occurs in `text`. */
export const count = (text: string, part: string): number => text.split(part).length - 1;
