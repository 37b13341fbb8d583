/**
 * One client connection: requests read one after another (keep-alive, pipelining), each
 * handed to the handler as a `Request` whose signal fires when the client goes away, and
 * its `Response` written back. The connection keeps the timers Deno.serve lacks: a new
 * connection has `headerTimeoutMs` to send its first request's head; between requests it
 * may stay idle `idleTimeoutMs`, after which the next head again has `headerTimeoutMs`
 * from its first byte; a body or a response write that makes no progress for
 * `idleTimeoutMs` ends the connection. Producing a response has no time limit: a long
 * generation is legitimate.
 */

import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { BodyDecoder, bodyStream } from "./body.ts";
import { HttpError } from "./errors.ts";
import {
  expectsContinue,
  framing,
  headEnd,
  MAX_HEAD_BYTES,
  parseHead,
  type RequestHead,
  wantsClose,
} from "./head.ts";
import { Inbound } from "./inbound.ts";
import { CONTINUE, refusal, type ResponseTarget, writeResponse } from "./response.ts";

export type Handler = (req: Request) => Response | Promise<Response>;

export interface ConnectionOptions {
  headerTimeoutMs: number;
  idleTimeoutMs: number;
  handler: Handler;
  /** The answer when the handler throws. */
  onError: (err: unknown) => Response | Promise<Response>;
  /** `host:port` for request URLs when the client's Host header is unusable. */
  authority: string;
  /** The connection has nothing in progress any more (it may be closed to make room). */
  onIdle(): void;
  /** The socket is closed (called once, at once, even if a handler is still running). */
  onClose(): void;
}

/**
 * `waiting` for a request, reading its `head`, or `active` (handler and response): only an
 * active connection has work that closing it would lose.
 */
type ConnectionState = "waiting" | "head" | "active" | "closed";

/** Pipelined bytes buffered while a response is produced; beyond it reading pauses. */
const MAX_PIPELINED = 64 * 1024;
/**
 * How long a connection that ends with request bytes still unread (a refused upload)
 * keeps reading and dropping them after its answer: closing with unread data resets the
 * connection, and a reset can destroy the answer before the client reads it.
 */
const LINGER_MS = 2000;
const AUTHORITY = /^(?:[A-Za-z0-9._~!$&'()*+,;=%-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
const httpLog = log.child({ component: "http" });

export class Connection {
  readonly #conn: Deno.Conn;
  readonly #opts: ConnectionOptions;
  readonly #in: Inbound;
  #state: ConnectionState = "waiting";
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stall: ReturnType<typeof setTimeout> | undefined;
  #exchange: AbortController | null = null;
  readonly #out: ResponseTarget;
  #draining = false;
  /** When it last finished a response (or was accepted): the eviction order. */
  idleSince: number = performance.now();

  constructor(conn: Deno.Conn, opts: ConnectionOptions) {
    this.#conn = conn;
    this.#opts = opts;
    this.#in = new Inbound(conn);
    this.#out = { write: (bytes) => this.#write(bytes), reader: null };
  }

  /** Nothing in progress: closing it loses no work. */
  get idle(): boolean {
    return this.#state === "waiting" || this.#state === "head";
  }

  /** Serves requests until the client leaves, a timer fires, or the connection is closed. */
  async run(): Promise<void> {
    let first = true;
    try {
      this.#arm(this.#opts.headerTimeoutMs);
      while (!this.#draining && this.#state !== "closed") {
        const head = await this.#readHead(first);
        if (head === null) break;
        first = false;
        const next = await this.#serve(head);
        if (next === "linger") await this.#linger();
        if (next !== "keep") break;
        this.#state = "waiting";
        this.idleSince = performance.now();
        this.#arm(this.#opts.idleTimeoutMs);
        this.#opts.onIdle();
      }
    } catch (err) {
      if (err instanceof HttpError && this.#state !== "closed") {
        await this.#write(refusal(err.status, err.message)).catch(() => {});
        await this.#linger();
      } else if (!(err instanceof HttpError)) {
        httpLog.debug("connection failed", { error: errorMessage(err) });
      }
    } finally {
      this.close();
    }
  }

  /** Stops taking requests: closes now if idle, else after the response in progress. */
  drain(): void {
    this.#draining = true;
    if (this.idle) this.close();
  }

  /** Closes at once: an exchange in progress is aborted and its response cancelled. */
  close(reason: unknown = new HttpError("client_closed", "the connection closed")): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    clearTimeout(this.#timer);
    clearTimeout(this.#stall);
    this.#exchange?.abort(reason);
    this.#out.reader?.cancel(reason).catch(() => {});
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
    this.#opts.onClose();
  }

  /** The next request head; null when the client closed cleanly between requests. */
  async #readHead(first: boolean): Promise<RequestHead | null> {
    let searched = 0;
    for (;;) {
      // A client may send stray line ends between requests (RFC 9112 section 2.2).
      let skip = 0;
      const buf = this.#in.buffered;
      while (skip < buf.length && (buf[skip] === 10 || buf[skip] === 13)) skip++;
      if (skip > 0) {
        this.#in.consume(skip);
        searched = 0;
      }
      if (this.#in.buffered.length > 0 && this.#state === "waiting") {
        this.#state = "head";
        // The first head's clock started at accept; later ones start at their first byte.
        if (!first) this.#arm(this.#opts.headerTimeoutMs);
      }
      const end = headEnd(this.#in.buffered, searched - 3);
      if ((end < 0 ? this.#in.buffered.length : end) > MAX_HEAD_BYTES) {
        throw new HttpError("header_too_large", `request head above ${MAX_HEAD_BYTES} bytes`);
      }
      if (end >= 0) return parseHead(this.#in.consume(end));
      searched = this.#in.buffered.length;
      if (this.#in.ended) return null;
      await this.#in.fill();
      if (this.#state === "closed") return null;
    }
  }

  /**
   * One exchange; resolves whether the connection may carry another (`keep`), ends now
   * (`close`), or ends once the unread rest of the request has been dropped (`linger`).
   */
  async #serve(head: RequestHead): Promise<"keep" | "close" | "linger"> {
    this.#state = "active";
    clearTimeout(this.#timer);
    const body = framing(head);
    const url = this.#url(head);
    const exchange = new AbortController();
    this.#exchange = exchange;
    const bodyless = head.method === "GET" || head.method === "HEAD";
    let bodyDone = body.kind === "none";
    let stream: ReadableStream<Uint8Array> | null = null;
    if (!bodyDone && !bodyless) {
      let continued = !expectsContinue(head);
      const decoder = new BodyDecoder(this.#in, body, {
        beforeFirstRead: async () => {
          if (!continued) {
            continued = true;
            await this.#write(CONTINUE);
          }
        },
        waiting: (on) => on ? this.#arm(this.#opts.idleTimeoutMs) : clearTimeout(this.#timer),
        done: () => {
          bodyDone = true;
          this.#watch(exchange.signal);
        },
      });
      stream = bodyStream(decoder);
    }
    if (bodyDone) this.#watch(exchange.signal);

    let request: Request;
    try {
      request = new Request(url, {
        method: head.method,
        headers: head.headers,
        body: stream,
        signal: exchange.signal,
      });
    } catch (err) {
      throw new HttpError("malformed_request", `malformed request: ${errorMessage(err)}`);
    }
    let response: Response;
    try {
      response = await this.#opts.handler(request);
    } catch (err) {
      response = await this.#opts.onError(err);
    }
    if (this.#isClosed()) {
      await response.body?.cancel().catch(() => {});
      return "close";
    }
    // A body the handler left unread cannot be skipped safely: the connection ends.
    const keep = !this.#draining && bodyDone && head.minor === 1 && !wantsClose(head);
    const whole = await writeResponse(this.#out, response, {
      head: head.method === "HEAD",
      close: !keep,
      minor: head.minor,
    });
    this.#exchange = null;
    if (!whole || this.#isClosed() || this.#in.ended) return "close";
    return keep ? "keep" : bodyDone ? "close" : "linger";
  }

  /** Sends FIN, then reads and drops what the client still sends, for a while. */
  async #linger(): Promise<void> {
    this.#state = "waiting";
    this.#arm(LINGER_MS);
    this.#opts.onIdle();
    try {
      await this.#conn.closeWrite();
    } catch {
      return;
    }
    while (!this.#in.ended && !this.#isClosed()) {
      this.#in.consume(this.#in.buffered.length);
      await this.#in.fill();
    }
  }

  /**
   * While a response is produced nothing else is read, except to notice a client that
   * leaves: then the exchange is aborted at once (the generation stops within a token).
   * Bytes of a pipelined next request are kept for it.
   */
  async #watch(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && this.#exchange?.signal === signal) {
      if (this.#in.buffered.length >= MAX_PIPELINED) return;
      await this.#in.fill();
      if (this.#in.ended) {
        if (this.#exchange?.signal === signal) {
          this.close(new HttpError("client_closed", "the client went away"));
        }
        return;
      }
    }
  }

  #url(head: RequestHead): string {
    let url: URL | null = null;
    try {
      if (head.target.startsWith("/")) {
        const host = head.headers.find(([n]) => n === "host")?.[1] ?? "";
        url = new URL(`http://${AUTHORITY.test(host) ? host : this.#opts.authority}${head.target}`);
      } else if (/^https?:\/\//i.test(head.target)) {
        url = new URL(head.target);
      }
    } catch {
      url = null;
    }
    if (url === null) throw new HttpError("malformed_request", "malformed request target");
    return url.href;
  }

  async #write(bytes: Uint8Array): Promise<void> {
    clearTimeout(this.#stall);
    this.#stall = setTimeout(
      () => this.close(new HttpError("request_timeout", "the client stopped reading")),
      this.#opts.idleTimeoutMs,
    );
    try {
      for (let at = 0; at < bytes.length;) at += await this.#conn.write(bytes.subarray(at));
    } finally {
      clearTimeout(this.#stall);
    }
  }

  /** A method, not a field read, so that the compiler does not narrow it across awaits. */
  #isClosed(): boolean {
    return this.#state === "closed";
  }

  #arm(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#expire(), ms);
  }

  #expire(): void {
    if (this.#state === "head") {
      const late = refusal(408, "request head not received in time");
      this.#write(late).catch(() => {}).finally(() => this.close());
    } else {
      this.close(new HttpError("request_timeout", "the client sent nothing in time"));
    }
  }
}
