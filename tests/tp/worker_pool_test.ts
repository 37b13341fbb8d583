/**
 * The worker pool's fan-out rule against stand-in workers (support/fake_worker.ts): every
 * worker has the request before the leader's part finishes, exactly one reply is read from
 * each even when one fails, a failed reply does not desynchronise later fan-outs, and a
 * worker that dies, hangs or breaks the protocol breaks the pool, is killed, and leaves no
 * process behind.
 */
import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { WorkerPool } from "../../src/tp/worker_pool.ts";
import { TpError } from "../../src/tp/errors.ts";
import type { Request } from "../../src/tp/protocol.ts";
import { running, until } from "./support/children.ts";
import { logged, withLogs } from "./support/logs.ts";

const FAKE = new URL("./support/fake_worker.ts", import.meta.url).pathname;
const STEP: Request = { op: "generate_step", model_id: "m", tokens: [1], offset: 0 };

interface Fixture {
  pool: WorkerPool;
  logs: string[];
  dir: string;
}

function pool(modes: string[]): Fixture {
  const dir = Deno.makeTempDirSync({ prefix: "tp-pool-" });
  const logs = modes.map((_, i) => `${dir}/rank${i + 1}.log`);
  for (const l of logs) Deno.writeTextFileSync(l, "");
  const p = WorkerPool.spawn(modes.length + 1, (rank) => [
    Deno.execPath(),
    "run",
    "-A",
    FAKE,
    "--mode",
    modes[rank - 1],
    "--log",
    logs[rank - 1],
    "--rank",
    String(rank),
  ]);
  return { pool: p, logs, dir };
}

function lines(file: string): string[] {
  return Deno.readTextFileSync(file).split("\n").filter(Boolean);
}

/** A test whose log lines are collected (and handed to it) instead of printed. */
function quietTest(name: string, fn: (log: string[]) => void | Promise<void>): void {
  Deno.test(name, () => withLogs(fn));
}

function cleanup(f: Fixture): void {
  f.pool.close();
  Deno.removeSync(f.dir, { recursive: true });
  assertEquals(running(FAKE), [], "no worker outlives the pool");
}

/** The leader's part: returns once every worker logged the step (proves fan-out first). */
function waitForAll(logs: string[]): number {
  const deadline = performance.now() + 10_000;
  while (!logs.every((l) => lines(l).some((x) => x.includes("generate_step")))) {
    if (performance.now() > deadline) throw new Error("the workers never all had the request");
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  }
  return logs.length;
}

quietTest("pool: requests reach every worker before the leader's part ends; one reply each", () => {
  const f = pool(["ok", "fail", "ok"]);
  try {
    const { leader, replies } = f.pool.fanOut(STEP, () => waitForAll(f.logs), {
      deadlineMs: 20_000,
    });
    assertEquals(leader, 3);
    assertEquals(replies.map((r) => r.op), ["generate_step_ok", "error", "generate_step_ok"]);
    assertEquals(replies[1], { op: "error", kind: "forward_failed", message: "boom" });
    assertEquals(f.pool.broken, null, "an error reply is an answer, not a broken worker");
    // The next fan-out reads fresh replies: nothing was left unread or read twice.
    const again = f.pool.fanOut({ op: "ping" }, () => null, { deadlineMs: 20_000 });
    assertEquals(again.replies.map((r) => r.op === "pong" ? r.rank : -1), [1, 2, 3]);
    assertEquals(f.logs.map((l) => lines(l).length), [2, 2, 2]);
  } finally {
    cleanup(f);
  }
});

quietTest("pool: a dead worker is reported, the others drained, the pool stays broken", (log) => {
  const f = pool(["ok", "die", "ok"]);
  let aborted = 0;
  try {
    const err = assertThrows(
      () =>
        f.pool.fanOut(STEP, () => waitForAll(f.logs), {
          deadlineMs: 20_000,
          abort: () => aborted++,
        }),
      TpError,
    );
    assertMatch(err.message, /rank 2 \(pid \d+\) exited with code 3/);
    assert(aborted >= 1, "the group is aborted so blocked ranks return");
    assertEquals(f.pool.workers[1].exitStatus, { code: 3, signal: null });
    const later = assertThrows(
      () => f.pool.fanOut({ op: "ping" }, () => 1, { deadlineMs: 1000 }),
      TpError,
    );
    assertEquals(later, err, "every later fan-out fails at once with the same error");
    assertEquals(f.logs.map((l) => lines(l).length), [1, 1, 1], "nothing sent after the break");
    assertEquals(logged(log, "tensor-parallel worker failed").map((r) => r.rank), [2]);
  } finally {
    cleanup(f);
  }
  // The healthy ones read end of input and exited cleanly.
  assertEquals(f.pool.workers.map((w) => w.exitStatus?.code), [0, 3, 0]);
});

quietTest("pool: a worker past the deadline is killed; garbage or a wrong reply breaks it", () => {
  const cases: Array<[string, RegExp]> = [
    ["hang", /rank 1 \(pid \d+\) missed the step deadline and was killed/],
    ["garbage", /^tensor-parallel rank 1 \(pid \d+\) sent a line that is not JSON/],
    ["wrong", /^tensor-parallel rank 1 \(pid \d+\): expected generate_step_ok or error in reply/],
  ];
  for (const [mode, pattern] of cases) {
    const f = pool([mode, "ok"]);
    try {
      const started = performance.now();
      const err = assertThrows(
        () => f.pool.fanOut(STEP, () => waitForAll(f.logs), { deadlineMs: 1500 }),
        TpError,
      );
      assertMatch(err.message, pattern);
      assert(performance.now() - started < 8000, `${mode}: took ${performance.now() - started} ms`);
      assertEquals(f.pool.workers[0].exitStatus?.signal, 9, `${mode}: killed`);
    } finally {
      cleanup(f);
    }
  }
});

quietTest(
  "pool: the leader's error comes after draining every reply; the pool stays usable",
  () => {
    const f = pool(["ok", "ok"]);
    try {
      let aborted = false;
      const err = assertThrows(
        () =>
          f.pool.fanOut(STEP, () => {
            waitForAll(f.logs);
            throw new TpError("comm_failed", "leader broke");
          }, { deadlineMs: 20_000, abort: () => (aborted = true) }),
        TpError,
      );
      assertEquals(err.message, "leader broke");
      assert(aborted);
      assertEquals(f.pool.broken, null);
      const again = f.pool.fanOut({ op: "ping" }, () => "x", { deadlineMs: 20_000 });
      assertEquals(again.replies.map((r) => r.op), ["pong", "pong"]);
    } finally {
      cleanup(f);
    }
    assertEquals(f.pool.workers.map((w) => w.exitStatus?.code), [0, 0], "shutdown: bye, exit 0");
  },
);

quietTest(
  "pool: a worker that cannot start is a typed error and leaves nothing behind",
  async () => {
    const err = assertThrows(
      () =>
        WorkerPool.spawn(
          3,
          (rank) => rank === 1 ? [Deno.execPath(), "run", "-A", FAKE] : ["/nonexistent/neuron"],
        ),
      TpError,
    );
    assertEquals(err.code, "tp_spawn_failed");
    assertMatch(err.message, /cannot start the worker of rank 2 \(\/nonexistent\/neuron\): ENOENT/);
    await until(() => running(FAKE).length === 0, 5000, "the started worker to be reaped");
  },
);
