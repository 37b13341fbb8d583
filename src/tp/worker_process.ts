/**
 * One worker process as its leader sees it: JSON lines to its stdin, JSON lines from its
 * stdout, every wait bounded by a deadline. Synchronous on purpose: the leader's part of a
 * step runs inside the engine's synchronous forward pass (spawn.c explains the rest).
 */

import { TpError } from "./errors.ts";
import { cString, EPIPE, errnoName, ETIMEDOUT, tpLibrary } from "./native.ts";

/** How a process ended: its exit code, or the signal that ended it. */
export interface ExitStatus {
  code: number | null;
  signal: number | null;
}

/** A reply line longer than this is a protocol error, not something to buffer forever. */
const MAX_LINE_BYTES = 1 << 20;
const READ_CHUNK = 64 * 1024;
const SIGKILL = 9;

const SIGNAL_NAMES: Record<number, string> = {
  1: "SIGHUP",
  2: "SIGINT",
  6: "SIGABRT",
  9: "SIGKILL",
  11: "SIGSEGV",
  15: "SIGTERM",
};

export function describeExit(s: ExitStatus): string {
  if (s.signal !== null) return `was killed by ${SIGNAL_NAMES[s.signal] ?? `signal ${s.signal}`}`;
  return `exited with code ${s.code}`;
}

/** Why talking to a worker failed; the leader marks its group broken for any of these. */
export type ChannelFailure = "exited" | "timeout" | "protocol";

export class ChannelError extends TpError {
  constructor(readonly failure: ChannelFailure, message: string) {
    super("tp_worker_failed", message);
  }
}

export class WorkerProcess {
  readonly pid: number;
  readonly rank: number;
  #stdin: number;
  #stdout: number;
  #pending = new Uint8Array(0);
  #exit: ExitStatus | null = null;
  readonly #chunk = new Uint8Array(READ_CHUNK);
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder();

  private constructor(rank: number, pid: number, stdin: number, stdout: number) {
    this.rank = rank;
    this.pid = pid;
    this.#stdin = stdin;
    this.#stdout = stdout;
  }

  /** Starts `argv` (argv[0] an absolute path) as the process of `rank`. */
  static spawn(argv: string[], rank: number): WorkerProcess {
    // One buffer holds every string and the table points into it; passing both keeps both
    // alive for the whole call.
    const strings = argv.map(cString);
    const text = new Uint8Array(strings.reduce((n, s) => n + s.length, 0));
    const table = new BigUint64Array(argv.length + 1);
    const base = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(text)));
    let offset = 0;
    strings.forEach((s, i) => {
      text.set(s, offset);
      table[i] = base + BigInt(offset);
      offset += s.length;
    });
    const out = new Int32Array(3);
    const rc = tpLibrary().sym.nk_spawn(table, out, text);
    if (rc !== 0) {
      throw new TpError(
        "tp_spawn_failed",
        `cannot start the worker of rank ${rank} (${argv[0]}): ${errnoName(rc)}`,
      );
    }
    return new WorkerProcess(rank, out[0], out[1], out[2]);
  }

  get name(): string {
    return `rank ${this.rank} (pid ${this.pid})`;
  }

  /** Its exit status once it is known to have ended (reaped). */
  get exitStatus(): ExitStatus | null {
    return this.#exit;
  }

  /** Writes one request. */
  send(message: unknown, timeoutMs: number): void {
    this.sendLine(JSON.stringify(message), timeoutMs);
  }

  /** Writes `text` and a newline. */
  sendLine(text: string, timeoutMs: number): void {
    if (this.#stdin < 0) throw this.#gone("its stdin is closed");
    const line = this.#encoder.encode(text + "\n");
    const rc = tpLibrary().sym.nk_fd_write(this.#stdin, line, BigInt(line.length), timeoutMs);
    if (rc === 0) return;
    if (rc === EPIPE) throw this.#gone("it stopped reading");
    if (rc === ETIMEDOUT) {
      throw new ChannelError(
        "timeout",
        `${this.name} did not take a request within ${timeoutMs} ms`,
      );
    }
    throw new ChannelError("exited", `writing to ${this.name} failed: ${errnoName(rc)}`);
  }

  /** Reads one reply line as JSON, waiting until `deadline` (performance.now() ms). */
  receive(deadline: number): unknown {
    for (;;) {
      const nl = this.#pending.indexOf(10);
      if (nl >= 0) {
        const line = this.#decoder.decode(this.#pending.subarray(0, nl));
        this.#pending = this.#pending.slice(nl + 1);
        try {
          return JSON.parse(line);
        } catch {
          throw new ChannelError(
            "protocol",
            `${this.name} sent a line that is not JSON: ${JSON.stringify(line.slice(0, 200))}`,
          );
        }
      }
      if (this.#pending.length > MAX_LINE_BYTES) {
        throw new ChannelError("protocol", `${this.name} sent a line over ${MAX_LINE_BYTES} bytes`);
      }
      const left = Math.max(0, Math.ceil(deadline - performance.now()));
      const n = Number(
        tpLibrary().sym.nk_fd_read(this.#stdout, this.#chunk, BigInt(READ_CHUNK), left),
      );
      if (n === ETIMEDOUT) {
        throw new ChannelError("timeout", `${this.name} sent no reply in time`);
      }
      if (n === 0) throw this.#gone("its stdout closed");
      if (n < 0) throw new ChannelError("exited", `reading from ${this.name}: ${errnoName(n)}`);
      const grown = new Uint8Array(this.#pending.length + n);
      grown.set(this.#pending);
      grown.set(this.#chunk.subarray(0, n), this.#pending.length);
      this.#pending = grown;
    }
  }

  /** The process ended (or is ending): waits briefly to say how. */
  #gone(what: string): ChannelError {
    const status = this.wait(500);
    const how = status ? describeExit(status) : what;
    return new ChannelError("exited", `${this.name} ${how}`);
  }

  /** Closes its stdin: a worker reads end of file and exits. */
  closeStdin(): void {
    if (this.#stdin < 0) return;
    tpLibrary().sym.nk_fd_close(this.#stdin);
    this.#stdin = -1;
  }

  /** Waits up to `timeoutMs` for the process to end and reaps it; null while it runs. */
  wait(timeoutMs: number): ExitStatus | null {
    if (this.#exit) return this.#exit;
    const out = new Int32Array(2);
    const rc = tpLibrary().sym.nk_child_wait(this.pid, Math.max(0, Math.ceil(timeoutMs)), out);
    if (rc === 1) {
      this.#exit = { code: out[0] >= 0 ? out[0] : null, signal: out[1] !== 0 ? out[1] : null };
    } else if (rc < 0) {
      // Not our child any more (reaped elsewhere): treat it as gone.
      this.#exit = { code: null, signal: null };
    }
    return this.#exit;
  }

  /** Ends the process at once (SIGKILL) and reaps it. */
  kill(): ExitStatus {
    if (!this.#exit) tpLibrary().sym.nk_child_kill(this.pid, SIGKILL);
    return this.wait(5000) ?? { code: null, signal: SIGKILL };
  }

  /** Releases the pipes (after the process was reaped or killed). */
  close(): void {
    this.closeStdin();
    if (this.#stdout >= 0) tpLibrary().sym.nk_fd_close(this.#stdout);
    this.#stdout = -1;
  }
}
