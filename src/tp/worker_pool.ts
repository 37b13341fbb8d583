/**
 * The leader's workers (ranks 1..N-1) and the fan-out rule every collective step obeys:
 * write the request to every worker before awaiting anything, do the leader's own part,
 * then read exactly one reply from every worker — even when the leader's part or another
 * worker failed — so requests and replies never drift apart.
 *
 * A worker that dies, misses the deadline or breaks the protocol breaks the pool: it is
 * killed, the group is aborted (so ranks blocked in a collective return), and every later
 * fan-out fails at once with the same error until the pool is closed and rebuilt.
 */

import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { TpError } from "./errors.ts";
import { checkReply, type Reply, type Request, type RequestOp } from "./protocol.ts";
import { ChannelError, describeExit, WorkerProcess } from "./worker_process.ts";

/** Time to write one request line (a worker reads its stdin between requests). */
const SEND_TIMEOUT_MS = 10_000;
/** Replies still being sent when a failed step's deadline passes get this much longer. */
const DRAIN_GRACE_MS = 2_000;
/** How long an orderly shutdown may take before a worker is killed. */
const EXIT_GRACE_MS = 5_000;

export interface FanOutOptions {
  /** Milliseconds the whole fan-out may take (leader part included). */
  deadlineMs: number;
  /** Releases ranks blocked in a collective (aborts the group); called on any failure. */
  abort?: () => void;
}

export interface FanOutResult<T> {
  leader: T;
  /** One reply per worker, in rank order (errors included; the caller judges them). */
  replies: Reply[];
}

export class WorkerPool {
  readonly workers: WorkerProcess[];
  #broken: TpError | null = null;
  #closed = false;

  private constructor(workers: WorkerProcess[]) {
    this.workers = workers;
  }

  /** Starts ranks 1..worldSize-1 with `command(rank)` each. */
  static spawn(worldSize: number, command: (rank: number) => string[]): WorkerPool {
    const workers: WorkerProcess[] = [];
    try {
      for (let rank = 1; rank < worldSize; rank++) {
        workers.push(WorkerProcess.spawn(command(rank), rank));
      }
    } catch (err) {
      for (const w of workers) {
        w.kill();
        w.close();
      }
      throw err;
    }
    return new WorkerPool(workers);
  }

  /** Why the pool is unusable, or null. */
  get broken(): TpError | null {
    return this.#broken;
  }

  /**
   * Sends `request` (or `request(rank)`) to every worker, runs `leader`, then reads one
   * reply from each. Throws the pool's failure when a worker failed (after draining the
   * rest), else the leader's error if it threw; error replies are returned, not thrown.
   */
  fanOut<T>(
    request: Request | ((rank: number) => Request),
    leader: () => T,
    options: FanOutOptions,
  ): FanOutResult<T> {
    if (this.#closed) throw new TpError("tp_worker_failed", "the worker pool is closed");
    if (this.#broken) throw this.#broken;
    const started = performance.now();
    const deadline = started + options.deadlineMs;
    const sent: Array<RequestOp | null> = this.workers.map((w) => {
      const req = typeof request === "function" ? request(w.rank) : request;
      try {
        w.send(req, SEND_TIMEOUT_MS);
        return req.op;
      } catch (err) {
        this.#fail(w, err, options);
        return null;
      }
    });

    let leaderResult: { value: T } | { error: unknown };
    try {
      leaderResult = { value: leader() };
    } catch (error) {
      leaderResult = { error };
      options.abort?.();
    }

    const replies: Reply[] = [];
    for (const [i, w] of this.workers.entries()) {
      const op = sent[i];
      if (op === null) {
        replies.push({ op: "error", kind: "forward_failed", message: `${w.name} is gone` });
        continue;
      }
      const until = this.#broken || "error" in leaderResult
        ? Math.max(deadline, performance.now() + DRAIN_GRACE_MS)
        : deadline;
      try {
        const reply = checkReply(op, w.receive(until));
        if (typeof reply === "string") throw new ChannelError("protocol", `${w.name}: ${reply}`);
        replies.push(reply);
      } catch (err) {
        this.#fail(w, err, options);
        replies.push({ op: "error", kind: "forward_failed", message: errorMessage(err) });
      }
    }

    if (this.#broken) throw this.#broken;
    if ("error" in leaderResult) throw leaderResult.error;
    return { leader: leaderResult.value, replies };
  }

  /** Kills a worker that failed and breaks the pool (the first failure names the cause). */
  #fail(w: WorkerProcess, err: unknown, options: FanOutOptions): void {
    const timeout = err instanceof ChannelError && err.failure === "timeout";
    const status = w.exitStatus ?? w.kill();
    const message = timeout
      ? `${w.name} missed the step deadline and was killed`
      : err instanceof ChannelError && err.failure === "exited"
      ? `${w.name} ${describeExit(status)}`
      : err instanceof ChannelError
      ? err.message
      : `${w.name}: ${errorMessage(err)}`;
    log.error("tensor-parallel worker failed", { rank: w.rank, pid: w.pid, error: message });
    this.#broken ??= new TpError("tp_worker_failed", `tensor-parallel ${message}`, { cause: err });
    options.abort?.();
  }

  /**
   * Asks every worker still running to shut down (`shutdown`, reply `bye`), waits for them to
   * exit, kills what remains, and reaps every child.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const deadline = performance.now() + EXIT_GRACE_MS;
    const asked = this.workers.filter((w) => {
      if (w.exitStatus || this.#broken) return false;
      try {
        w.send({ op: "shutdown" }, 1000);
        return true;
      } catch {
        return false;
      }
    });
    for (const w of asked) {
      try {
        w.receive(deadline);
      } catch {
        // It exits below either way.
      }
    }
    for (const w of this.workers) {
      w.closeStdin();
      const status = w.wait(Math.max(0, deadline - performance.now())) ?? w.kill();
      if (status.code !== 0) {
        log.debug("tensor-parallel worker ended", { rank: w.rank, how: describeExit(status) });
      }
      w.close();
    }
  }
}
