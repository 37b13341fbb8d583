/**
 * Another rank of a CPU communicator group, as a separate process, for the collective's
 * tests and benchmark. It joins the group of `--id` as `--rank` and then, by `--mode`:
 *   check  runs the sequence comm_test.ts mirrors and prints "ok" (or what differed)
 *   die    exits with code 5 right after joining
 *   wait   enters an all-reduce nobody else joins and prints how it ended
 *   bench  runs `--iters` all-reduces of each size in `--sizes`
 */
import { parseArgs } from "node:util";
import { commIdFromHex } from "../../../src/tp/comm_id.ts";
import { CpuCommunicator, parseCpuCommId } from "../../../src/tp/cpu_comm.ts";
import { checkPattern, fillPattern, ptr } from "./comm_patterns.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    id: { type: "string" },
    rank: { type: "string" },
    mode: { type: "string" },
    iters: { type: "string" },
    sizes: { type: "string" },
  },
});
const id = parseCpuCommId(commIdFromHex(values.id!))!;
const rank = Number(values.rank);
const comm = CpuCommunicator.open(id, rank);
comm.arm(30_000);
comm.join();
comm.disarm();

switch (values.mode) {
  case "check": {
    const problems = [
      ...checkPattern(comm, "f32"),
      ...checkPattern(comm, "f16"),
      ...checkPattern(comm, "broadcast"),
    ];
    comm.barrier();
    const seen = comm.sanityCheck();
    if (seen !== id.world) problems.push(`sanity observed ${seen}`);
    console.log(problems.length === 0 ? "ok" : problems.join("; "));
    break;
  }
  case "die":
    Deno.exit(5);
    break;
  case "wait":
    // Arrives after rank 0 gave up on a collective with nobody in it.
    await new Promise((r) => setTimeout(r, 1000));
    try {
      const x = new Float32Array(8);
      comm.allReduceSum(ptr(x), x.length, "f32", null);
      console.log("returned");
    } catch (err) {
      console.log((err as Error).message);
    }
    break;
  case "bench": {
    const iters = Number(values.iters);
    for (const n of values.sizes!.split(",").map(Number)) {
      const x = new Float32Array(n);
      fillPattern(x, rank);
      for (let i = 0; i < iters; i++) comm.allReduceSum(ptr(x), n, "f32", null);
    }
    console.log("ok");
    break;
  }
}
comm.close();
