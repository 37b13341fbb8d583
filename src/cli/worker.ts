import { runWorker } from "../tp/mod.ts";
import { type Command, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron --worker --rank R --tp-size W --cuda-device D

A tensor-parallel worker: rank R (1..W-1) of a model split over W ranks, on CUDA device D.
Started by the node that leads the model, never by hand: it reads one JSON request per line
on standard input and writes one JSON reply per line on standard output; standard error is
its log. End of input or a shutdown request ends it.`;

function intFlag(values: Record<string, unknown>, name: string, min: number): number {
  const raw = values[name];
  if (typeof raw !== "string") throw new UsageError(`worker mode: --${name} is required`);
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(Number.isSafeInteger(n) && n >= min)) {
    throw new UsageError(`worker mode: --${name} must be an integer >= ${min}, got ${raw}`);
  }
  return n;
}

/** `neuron --worker ...`: the tensor-parallel child process (WIRE.md). */
export const workerCommand: Command = {
  summary: "tensor-parallel worker process (started by the node itself)",
  run(args: string[]): Promise<number> {
    const { values } = parseFlags({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        worker: { type: "boolean" },
        rank: { type: "string" },
        "tp-size": { type: "string" },
        "cuda-device": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }, "worker mode");
    if (values.help) {
      console.log(HELP);
      return Promise.resolve(0);
    }
    const worldSize = intFlag(values, "tp-size", 2);
    const rank = intFlag(values, "rank", 1);
    const cudaDevice = intFlag(values, "cuda-device", 0);
    if (rank >= worldSize) {
      throw new UsageError(`worker mode: --rank ${rank} is not below --tp-size ${worldSize}`);
    }
    return runWorker({ rank, worldSize, cudaDevice });
  },
};
