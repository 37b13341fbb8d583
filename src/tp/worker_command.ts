/**
 * How a leader starts the worker of a rank: this same program in worker mode — the
 * executable itself when compiled, else Deno running this checkout's main.ts.
 */

import { isCompiled } from "../common/assets.ts";

export type WorkerCommand = (rank: number, worldSize: number, cudaDevice: number) => string[];

const ROOT = new URL("../../", import.meta.url);

export const workerCommand: WorkerCommand = (rank, worldSize, cudaDevice) => {
  const args = [
    "--worker",
    "--rank",
    String(rank),
    "--tp-size",
    String(worldSize),
    "--cuda-device",
    String(cudaDevice),
  ];
  if (isCompiled()) return [Deno.execPath(), ...args];
  const path = (p: string): string => decodeURIComponent(new URL(p, ROOT).pathname);
  return [
    Deno.execPath(),
    "run",
    "-A",
    "--unstable-no-legacy-abort",
    `--config=${path("deno.json")}`,
    path("main.ts"),
    ...args,
  ];
};
