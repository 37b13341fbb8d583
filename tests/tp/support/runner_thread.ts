/// <reference lib="deno.worker" />
/**
 * A tensor-parallel runner on a thread of its own, like a model's engine Worker: opens the
 * group for the fixture it is sent (with the device labels it is sent) and says "ready". The test then tears the thread down
 * without closing anything.
 */
import { captureLogs } from "../../../src/common/log.ts";
import { openModel } from "../../../src/runner/mod.ts";
import { TpRunner } from "../../../src/tp/tp_runner.ts";

captureLogs(() => {});

self.onmessage = (e: MessageEvent<{ path: string; devices: number[] }>) => {
  TpRunner.open(
    openModel(e.data.path),
    { device: "cpu", threads: 1, tensorParallel: 2, devices: e.data.devices },
    { blockSize: 16, nBlocks: 8, dtype: "f16" },
  );
  self.postMessage("ready");
};
