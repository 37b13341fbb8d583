/**
 * Request bodies, decoded from the connection's bytes by their framing (Content-Length or
 * chunked) and handed to the handler as a stream it pulls from. Nothing is read before the
 * handler asks, so a body the handler refuses (too large, wrong type) is never taken in.
 */

import { HttpError } from "./errors.ts";
import type { Framing } from "./head.ts";
import type { Inbound } from "./inbound.ts";

const MAX_CHUNK_LINE = 4096;
const MAX_TRAILERS = 16 * 1024;
const LF = 10;
const CR = 13;

export interface BodyHooks {
  /** Before the first read (the place for `100 Continue`). */
  beforeFirstRead(): Promise<void>;
  /** The decoder waits for bytes (true) or got them (false): the stall timer's cue. */
  waiting(on: boolean): void;
  /** The whole body was read. */
  done(): void;
}

type State =
  | { at: "size" }
  | { at: "data"; left: number; chunked: boolean }
  | { at: "data_end" }
  | { at: "trailers"; seen: number }
  | { at: "done" };

function malformed(message: string): HttpError {
  return new HttpError("malformed_request", message);
}

export class BodyDecoder {
  readonly #in: Inbound;
  readonly #hooks: BodyHooks;
  #state: State;
  #started = false;

  constructor(inbound: Inbound, framing: Framing, hooks: BodyHooks) {
    this.#in = inbound;
    this.#hooks = hooks;
    this.#state = framing.kind === "length"
      ? { at: "data", left: framing.length, chunked: false }
      : framing.kind === "chunked"
      ? { at: "size" }
      : { at: "done" };
  }

  get done(): boolean {
    return this.#state.at === "done";
  }

  /** The next piece of the body; null at its end. */
  async next(): Promise<Uint8Array | null> {
    if (!this.#started) {
      this.#started = true;
      if (!this.done) await this.#hooks.beforeFirstRead();
    }
    for (;;) {
      const s = this.#state;
      switch (s.at) {
        case "done":
          return null;
        case "data": {
          await this.#need(1);
          const piece = this.#in.consume(Math.min(s.left, this.#in.buffered.length));
          s.left -= piece.length;
          if (s.left === 0) this.#advance(s.chunked ? { at: "data_end" } : { at: "done" });
          return piece;
        }
        case "size": {
          const line = await this.#line(MAX_CHUNK_LINE);
          const hex = line.split(";")[0].trim();
          if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) throw malformed("malformed chunk size");
          const size = parseInt(hex, 16);
          this.#state = size === 0 ? { at: "trailers", seen: 0 } : {
            at: "data",
            left: size,
            chunked: true,
          };
          break;
        }
        case "data_end": {
          const line = await this.#line(2);
          if (line !== "") throw malformed("chunk data longer than its size");
          this.#state = { at: "size" };
          break;
        }
        case "trailers": {
          const line = await this.#line(MAX_TRAILERS - s.seen);
          s.seen += line.length + 2;
          if (line === "") this.#advance({ at: "done" });
          break;
        }
      }
    }
  }

  #advance(state: State): void {
    this.#state = state;
    if (state.at === "done") this.#hooks.done();
  }

  /** Waits until at least `n` bytes are buffered. */
  async #need(n: number): Promise<void> {
    while (this.#in.buffered.length < n) {
      if (this.#in.ended) throw new HttpError("client_closed", "the client closed mid-body");
      this.#hooks.waiting(true);
      try {
        await this.#in.fill();
      } finally {
        this.#hooks.waiting(false);
      }
    }
  }

  /** One line (without its CRLF or LF), at most `max` bytes long. */
  async #line(max: number): Promise<string> {
    for (;;) {
      const buf = this.#in.buffered;
      const lf = buf.indexOf(LF);
      if (lf >= 0) {
        if (lf > max) throw malformed("chunk framing line too long");
        const bytes = this.#in.consume(lf + 1);
        const end = lf > 0 && bytes[lf - 1] === CR ? lf - 1 : lf;
        return String.fromCharCode(...bytes.subarray(0, end));
      }
      if (buf.length > max) throw malformed("chunk framing line too long");
      await this.#need(buf.length + 1);
    }
  }
}

/** The decoder as the stream a `Request` carries. */
export function bodyStream(decoder: BodyDecoder): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(controller): Promise<void> {
      const piece = await decoder.next();
      if (piece === null) controller.close();
      else controller.enqueue(piece);
    },
  }, { highWaterMark: 0 });
}
