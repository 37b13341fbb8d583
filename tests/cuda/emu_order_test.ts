/**
 * The kernels do not depend on the order threads and blocks run in: the same work
 * (emu_order_child.ts: a handful of kernels and a small model's steps) under
 * NEURON_EMU_ORDER=forward and under a shuffled schedule reads back the same bits. Each
 * order runs in a child process, since the emulator reads the knob once per process.
 */

import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { emulator } from "./support.ts";

const emu = await emulator();
const CHILD = new URL("./emu_order_child.ts", import.meta.url).pathname;

interface ChildReport {
  order: number;
  probe: number[];
  reads: number;
  sha256: string;
}

async function runChild(order: string): Promise<{ ok: boolean; report: string; err: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", CHILD],
    env: { NEURON_EMU_ORDER: order },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { ok: out.success, report: text.decode(out.stdout), err: text.decode(out.stderr) };
}

async function reportOf(order: string): Promise<ChildReport> {
  const { ok, report, err } = await runChild(order);
  assert(ok, `NEURON_EMU_ORDER=${order}: the child failed:\n${err}`);
  return JSON.parse(report.trim().split("\n").at(-1)!);
}

Deno.test({
  name: "emulated CUDA: kernels and a model's steps read back the same bits in forward and " +
    "shuffled thread and block order",
  ignore: emu === null,
  async fn() {
    const forward = await reportOf("forward");
    const shuffled = await reportOf("shuffle:2026");
    const identity = Array.from({ length: 32 }, (_, i) => i);
    // The knob took effect: the probe saw the identity, then another permutation of it.
    assertEquals([forward.order, shuffled.order], [0, 2]);
    assertEquals(forward.probe, identity);
    assertEquals([...shuffled.probe].sort((a, b) => a - b), identity);
    assert(
      shuffled.probe.some((v, i) => v !== i) && shuffled.probe.some((v, i) => v !== 31 - i),
      `the shuffled schedule is neither forward nor reverse: ${shuffled.probe}`,
    );
    assert(forward.reads > 100, `only ${forward.reads} reads`);
    assertEquals(
      { reads: shuffled.reads, sha256: shuffled.sha256 },
      { reads: forward.reads, sha256: forward.sha256 },
    );
  },
});

Deno.test({
  name: "emulated CUDA: an unknown NEURON_EMU_ORDER fails the first launch, naming the choices",
  ignore: emu === null,
  async fn() {
    const { ok, err } = await runChild("sideways");
    assert(!ok, "the child ran with NEURON_EMU_ORDER=sideways");
    assertMatch(err, /NEURON_EMU_ORDER=sideways is not forward, reverse or shuffle:SEED/);
  },
});
