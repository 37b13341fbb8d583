/**
 * The CPU communicator between real processes: this test is rank 0, support/comm_peer.ts
 * the others. Sums (f32 over several chunks, f16), broadcast, barrier and the sanity check
 * agree on every rank; a rank that dies fails the others quickly; a step deadline aborts a
 * collective nobody joins, and the abort reaches the other ranks.
 */
import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { commIdToHex } from "../../src/tp/comm_id.ts";
import { CpuCommunicator } from "../../src/tp/cpu_comm.ts";
import { TpError } from "../../src/tp/errors.ts";
import { checkPattern, ptr } from "./support/comm_patterns.ts";

const PEER = new URL("./support/comm_peer.ts", import.meta.url).pathname;

function peer(id: Uint8Array, rank: number, mode: string): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", PEER, "--id", commIdToHex(id), "--rank", String(rank), "--mode", mode],
    stdout: "piped",
    stderr: "inherit",
    stdin: "null",
  }).spawn();
}

async function printed(child: Deno.ChildProcess): Promise<{ code: number; text: string }> {
  const out = await child.output();
  return { code: out.code, text: new TextDecoder().decode(out.stdout).trim() };
}

function joined(
  world: number,
  mode: string,
): { comm: CpuCommunicator; peers: Deno.ChildProcess[] } {
  const { comm, id } = CpuCommunicator.create(world);
  const peers = Array.from({ length: world - 1 }, (_, i) => peer(id, i + 1, mode));
  comm.arm(30_000);
  comm.join();
  comm.disarm();
  return { comm, peers };
}

Deno.test("cpu comm: one rank alone sums to itself", () => {
  const { comm } = CpuCommunicator.create(1);
  try {
    comm.join();
    assertEquals(comm.sanityCheck(), 1);
    assertEquals(checkPattern(comm, "f32"), []);
    assertEquals(checkPattern(comm, "f16"), []);
    assertEquals(checkPattern(comm, "broadcast"), []);
    comm.barrier();
  } finally {
    comm.close();
  }
});

Deno.test("cpu comm: three processes agree on sums, broadcasts and the sanity check", async () => {
  const { comm, peers } = joined(3, "check");
  try {
    const problems = [
      ...checkPattern(comm, "f32"),
      ...checkPattern(comm, "f16"),
      ...checkPattern(comm, "broadcast"),
    ];
    comm.barrier();
    assertEquals(comm.sanityCheck(), 3);
    assertEquals(problems, []);
    for (const p of peers) assertEquals(await printed(p), { code: 0, text: "ok" });
  } finally {
    comm.close();
  }
});

Deno.test("cpu comm: a rank whose process died fails the collective at once", async () => {
  const { comm, peers } = joined(2, "die");
  try {
    assertEquals((await printed(peers[0])).code, 5);
    const started = performance.now();
    const x = new Float32Array(16);
    const err = assertThrows(() => comm.allReduceSum(ptr(x), 16, "f32", null), TpError);
    assertEquals(err.code, "comm_failed");
    assertMatch(err.message, /the process of rank 1 is gone/);
    assert(performance.now() - started < 2000, `took ${performance.now() - started} ms`);
    // The group stays failed.
    assertThrows(() => comm.barrier(), TpError);
  } finally {
    comm.close();
  }
});

Deno.test("cpu comm: a deadline aborts a collective nobody joins; the others see the abort", async () => {
  const { comm, peers } = joined(2, "wait");
  try {
    const started = performance.now();
    comm.arm(300);
    const x = new Float32Array(16);
    const err = assertThrows(() => comm.allReduceSum(ptr(x), 16, "f32", null), TpError);
    comm.disarm();
    const ms = performance.now() - started;
    assertMatch(err.message, /the tensor-parallel group was aborted/);
    assert(comm.deadlineExpired);
    assert(ms >= 250 && ms < 3000, `aborted after ${ms} ms`);
    const { code, text } = await printed(peers[0]);
    assertEquals(code, 0);
    assertMatch(text, /all-reduce: the tensor-parallel group was aborted/);
  } finally {
    comm.close();
  }
});
