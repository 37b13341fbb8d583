/**
 * The bytes a connection has sent that nobody has consumed yet. There is at most one read
 * in flight, shared by whoever waits for more: the head parser, the body decoder, and the
 * watch for a client that goes away while its response is produced.
 */

const EMPTY = new Uint8Array(0);
/** Per read, and held by every connection waiting for its next request. */
const READ_SIZE = 8 * 1024;

/** What an Inbound reads from: a TCP connection (or, in tests, scripted bytes). */
export interface ByteReader {
  read(p: Uint8Array): Promise<number | null>;
}

export class Inbound {
  readonly #conn: ByteReader;
  #buf: Uint8Array = EMPTY;
  #reading: Promise<void> | null = null;
  #ended = false;

  constructor(conn: ByteReader) {
    this.#conn = conn;
  }

  /** Received and not consumed. */
  get buffered(): Uint8Array {
    return this.#buf;
  }

  /** The peer closed its side, reset the connection, or the connection was closed here. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Takes the first `n` buffered bytes. */
  consume(n: number): Uint8Array {
    const out = this.#buf.subarray(0, n);
    this.#buf = this.#buf.subarray(n);
    return out;
  }

  /** Waits until more bytes arrived or the connection ended (then `ended`). */
  fill(): Promise<void> {
    if (this.#ended) return Promise.resolve();
    this.#reading ??= this.#read().finally(() => {
      this.#reading = null;
    });
    return this.#reading;
  }

  async #read(): Promise<void> {
    // Fresh memory per read: consumed subarrays handed out earlier stay intact.
    const chunk = new Uint8Array(READ_SIZE);
    let n: number | null;
    try {
      n = await this.#conn.read(chunk);
    } catch {
      n = null;
    }
    if (n === null) {
      this.#ended = true;
      return;
    }
    if (this.#buf.length === 0) {
      this.#buf = chunk.subarray(0, n);
    } else {
      const joined = new Uint8Array(this.#buf.length + n);
      joined.set(this.#buf);
      joined.set(chunk.subarray(0, n), this.#buf.length);
      this.#buf = joined;
    }
  }
}
