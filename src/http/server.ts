/**
 * The node's HTTP/1.1 server. Deno.serve has no header or idle timeouts, no connection
 * cap, and its accept loop rejects (and the process dies) when the process runs out of
 * file descriptors; this one owns its listener instead:
 *
 * - at most `maxConnections` open connections, below the open-file limit. At the cap a new
 *   connection is taken by closing the one idle the longest (nothing is lost: it had no
 *   request in progress); when every connection is busy, new ones wait in the kernel's
 *   backlog until one ends or falls idle: back-pressure, not failure.
 * - EMFILE/ENFILE on accept (descriptors used up elsewhere) is back-pressure too: an idle
 *   connection closed to free one, accepting retried after a short pause, a warning logged
 *   once (and at most once a minute while it lasts).
 * - each connection keeps header, idle and stall timers (see connection.ts).
 */

import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { Connection, type Handler } from "./connection.ts";

export interface HttpServerOptions {
  hostname: string;
  port: number;
  headerTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  handler: Handler;
  onError: (err: unknown) => Response | Promise<Response>;
}

const httpLog = log.child({ component: "http" });
const MAX_BACKOFF_MS = 1000;
const WARN_EVERY_MS = 60_000;

/**
 * A warning about a condition that can recur many times a second (a flood of clients):
 * logged when first seen, then at most once a minute with how often it happened since.
 */
class Warning {
  readonly #msg: string;
  #loggedAt = -Infinity;
  #times = 0;

  constructor(msg: string) {
    this.#msg = msg;
  }

  seen(fields: Record<string, unknown>): void {
    this.#times++;
    const now = performance.now();
    if (now - this.#loggedAt < WARN_EVERY_MS) return;
    httpLog.warn(this.#msg, { ...fields, times: this.#times });
    this.#loggedAt = now;
    this.#times = 0;
  }
}

function outOfDescriptors(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === "EMFILE" || code === "ENFILE";
}

export class HttpServer {
  readonly addr: Deno.NetAddr;
  readonly #listener: Deno.TcpListener;
  readonly #opts: HttpServerOptions;
  readonly #connections = new Set<Connection>();
  readonly #done: Promise<void>;
  #closing = false;
  #wake: (() => void) | null = null;
  #allClosed: (() => void) | null = null;
  #drained: Promise<void> | null = null;
  readonly #outOfFds = new Warning("out of file descriptors: closing an idle connection, retrying");
  readonly #full = new Warning("connection limit reached: new connections wait");

  /** Binds at once (throws if the address is taken) and starts accepting. */
  constructor(opts: HttpServerOptions) {
    this.#opts = opts;
    this.#listener = Deno.listen({ hostname: opts.hostname, port: opts.port });
    this.addr = this.#listener.addr;
    this.#done = this.#accept();
  }

  /** Open connections. */
  get connections(): number {
    return this.#connections.size;
  }

  /**
   * Stops accepting and closes idle connections; busy ones close after their response.
   * Resolves when every connection is closed.
   */
  drain(): Promise<void> {
    this.#drained ??= (async () => {
      this.#stopAccepting();
      const closed = this.#connections.size === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => (this.#allClosed = resolve));
      for (const c of this.#connections) c.drain();
      await this.#done;
      await closed;
    })();
    return this.#drained;
  }

  /** Closes every connection now, aborting what is in progress. */
  closeAll(): void {
    this.#stopAccepting();
    for (const c of this.#connections) c.close();
  }

  #stopAccepting(): void {
    if (this.#closing) return;
    this.#closing = true;
    try {
      this.#listener.close();
    } catch {
      // already closed
    }
    this.#wake?.();
  }

  async #accept(): Promise<void> {
    let backoff = 0;
    while (!this.#closing) {
      // Nothing is taken in while every place is busy: clients wait in the kernel's backlog.
      if (!await this.#room(false)) break;
      let conn: Deno.TcpConn;
      try {
        conn = await this.#listener.accept();
      } catch (err) {
        if (this.#closing) break;
        if (outOfDescriptors(err)) {
          this.#outOfFds.seen({ connections: this.#connections.size });
          this.#oldestIdle()?.close();
          backoff = Math.min(Math.max(backoff * 2, 10), MAX_BACKOFF_MS);
          await new Promise((r) => setTimeout(r, backoff));
        } else {
          httpLog.debug("accept failed", { error: errorMessage(err) });
        }
        continue;
      }
      backoff = 0;
      // A client is here: an idle connection makes room, else it waits, unread, for one.
      if (!await this.#room(true)) {
        conn.close();
        break;
      }
      this.#serve(conn);
    }
  }

  /**
   * Waits until there is a place for one more connection: a free one, or (when `evict`,
   * for a client already accepted) the longest-idle connection closed to make one. An idle
   * connection is only closed for a client that is there. False once closing.
   */
  async #room(evict: boolean): Promise<boolean> {
    while (!this.#closing && this.#connections.size >= this.#opts.maxConnections) {
      const idle = this.#oldestIdle();
      if (idle && evict) {
        idle.close();
        continue;
      }
      if (idle) return true;
      this.#full.seen({ max_connections: this.#opts.maxConnections });
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
    return !this.#closing;
  }

  #serve(conn: Deno.TcpConn): void {
    try {
      conn.setNoDelay(true);
    } catch {
      // the peer is already gone; run() finds out
    }
    const host = this.addr.hostname.includes(":") ? `[${this.addr.hostname}]` : this.addr.hostname;
    const c: Connection = new Connection(conn, {
      headerTimeoutMs: this.#opts.headerTimeoutMs,
      idleTimeoutMs: this.#opts.idleTimeoutMs,
      handler: this.#opts.handler,
      onError: this.#opts.onError,
      authority: `${host}:${this.addr.port}`,
      onIdle: () => this.#wake?.(),
      onClose: () => {
        this.#connections.delete(c);
        this.#wake?.();
        if (this.#connections.size === 0) this.#allClosed?.();
      },
    });
    this.#connections.add(c);
    if (this.#closing) c.drain();
    c.run();
  }

  /** The connection idle the longest, if any is idle. */
  #oldestIdle(): Connection | undefined {
    let oldest: Connection | undefined;
    for (const c of this.#connections) {
      if (c.idle && (!oldest || c.idleSince < oldest.idleSince)) oldest = c;
    }
    return oldest;
  }
}
