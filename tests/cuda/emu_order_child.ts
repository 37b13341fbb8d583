/**
 * The work emu_order_test.ts runs under each NEURON_EMU_ORDER, in a child process of its
 * own (the order is read once per process): a handful of kernels (mat-vec and cuBLAS
 * matmuls, norms, rope, paged attention, argmax) and a small model's prefill and decode
 * steps. Prints one JSON line: the order the emulator ran in, the schedule of a probe
 * kernel (when each of its 2 x 2 blocks of 8 threads first ran), how many device reads there
 * were, and a SHA-256 over every value read back from the device.
 */

import { emulator } from "./support.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import { Pair } from "../gpu/checks/pair.ts";
import { checkMatmul } from "../gpu/checks/matmul.ts";
import { checkArgmax, checkRmsNorm } from "../gpu/checks/ops.ts";
import { checkRope } from "../gpu/checks/rope.ts";
import { checkAttention } from "../gpu/checks/attention.ts";
import { Decoder, smallModel } from "../gpu/checks/model.ts";
import { runProbe } from "./emu/probe.ts";

const emu = await emulator();
if (emu === null) throw new Error("the emulator cannot be built here");

const reads: Uint8Array[] = [];

/** A backend whose every read is recorded. */
function recorded(be: CudaBackend): CudaBackend {
  const read = be.read.bind(be);
  const argmaxRows = be.argmaxRows.bind(be);
  be.read = (a) => {
    const out = read(a);
    reads.push(new Uint8Array(out.buffer.slice(0)));
    return out;
  };
  be.argmaxRows = (a) => {
    const out = argmaxRows(a);
    reads.push(new Uint8Array(out.buffer.slice(0)));
    return out;
  };
  return be;
}

function withBackend(fn: (be: CudaBackend) => void): void {
  const be = recorded(emu!.backend());
  try {
    fn(be);
  } finally {
    be.close();
  }
}

withBackend((be) => {
  const p = new Pair(be);
  checkMatmul(p, "Q4_K", true);
  checkMatmul(p, "Q8_0", true);
  checkRmsNorm(p);
  checkRope(p);
  checkAttention(p, ["f16"]);
  checkArgmax(p);
});

const dir = await Deno.makeTempDir();
try {
  const path = smallModel(dir, "q8_0");
  withBackend((be) => {
    const d = new Decoder(path, be);
    try {
      const table = Int32Array.from([2, 0]);
      be.read(d.step([[5, 77, 300, 12, 9]], [0], [table]));
      for (let k = 0; k < 3; k++) be.read(d.step([[40 + k]], [5 + k], [table]));
    } finally {
      d.close();
    }
  });
} finally {
  await Deno.remove(dir, { recursive: true });
}

/** When each thread of the emulator's order probe first ran, block by block. */
function probe(): number[] {
  const n = 32;
  const seq = runProbe(emu!.lib, "emu_order_probe", {
    grid: [2, 2],
    block: 8,
    words: n + 1,
    params: (memory) => [memory, memory + BigInt(4 * n)],
  });
  return Array.from(seq.subarray(0, n));
}

const all = new Uint8Array(reads.reduce((n, r) => n + r.length, 0));
let at = 0;
for (const r of reads) {
  all.set(r, at);
  at += r.length;
}
const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
console.log(JSON.stringify({
  order: emu.control.stat("order"),
  probe: probe(),
  reads: reads.length,
  sha256: Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""),
}));
