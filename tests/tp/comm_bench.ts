/**
 * All-reduce latency of the CPU communicator between two processes (`deno task bench:tp`):
 * hidden-size vectors of f32, the sum a tensor-parallel decode step runs twice per layer.
 * Rank 0 is this process, rank 1 a support/comm_peer.ts process doing the same calls.
 */
import { commIdToHex } from "../../src/tp/comm_id.ts";
import { CpuCommunicator } from "../../src/tp/cpu_comm.ts";
import { fillPattern, ptr } from "./support/comm_patterns.ts";

const SIZES = [1024, 4096];
const ITERS = 5000;
const WARMUP = 500;

const { comm, id } = CpuCommunicator.create(2);
const peer = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "-A",
    new URL("./support/comm_peer.ts", import.meta.url).pathname,
    "--id",
    commIdToHex(id),
    "--rank",
    "1",
    "--mode",
    "bench",
    "--iters",
    String(ITERS + WARMUP),
    "--sizes",
    SIZES.join(","),
  ],
  stdout: "null",
  stdin: "null",
}).spawn();
comm.arm(30_000);
comm.join();
comm.disarm();

const rows: Array<Record<string, string | number>> = [];
for (const n of SIZES) {
  const x = new Float32Array(n);
  fillPattern(x, 0);
  const address = ptr(x);
  for (let i = 0; i < WARMUP; i++) comm.allReduceSum(address, n, "f32", null);
  const samples = new Float64Array(ITERS);
  const started = performance.now();
  for (let i = 0; i < ITERS; i++) {
    const t = performance.now();
    comm.allReduceSum(address, n, "f32", null);
    samples[i] = performance.now() - t;
  }
  const total = performance.now() - started;
  samples.sort();
  const us = (ms: number): number => Math.round(ms * 10_000) / 10;
  rows.push({
    floats: n,
    "mean µs": us(total / ITERS),
    "p50 µs": us(samples[Math.floor(ITERS / 2)]),
    "p99 µs": us(samples[Math.floor(ITERS * 0.99)]),
  });
}
await peer.status;
comm.close();
console.log(`CPU communicator all-reduce, 2 processes, ${ITERS} iterations each`);
console.table(rows);
