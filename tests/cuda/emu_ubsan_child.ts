/**
 * Runs the emulator's bounds probe with the index given as the argument, for
 * emu_ubsan_test.ts; prints what the first thread read.
 */

import { emulator } from "./support.ts";
import { runProbe } from "./emu/probe.ts";

const emu = await emulator();
if (emu === null) throw new Error("the emulator cannot be built here");
const index = Number(Deno.args[0]);
const out = runProbe(emu.lib, "emu_bounds_probe", {
  grid: [1, 1],
  block: 32,
  words: 32,
  params: (memory) => [memory, BigInt(index)],
});
console.log(out[0]);
