/**
 * The UBSan build of the emulator (NEURON_EMU_SANITIZE=ubsan, `deno task test:emu-ubsan`)
 * stops a kernel that indexes a shared or a local array out of bounds, naming the array's
 * type: the reports the CI step that runs emulated tests under it fails on. Each probe runs
 * in a child process, since a report aborts the process. Ignored in other builds.
 */

import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { emulator } from "./support.ts";
import { emuVariant } from "./emu/build_emu.ts";

const emu = await emulator();
const ubsan = emuVariant() === "ubsan";
const CHILD = new URL("./emu_ubsan_child.ts", import.meta.url).pathname;

async function probe(index: number): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", CHILD, String(index)],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { ok: out.success, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
}

Deno.test({
  name: "emulated CUDA under UBSan: out-of-bounds shared and local array indices abort the " +
    "kernel, in-bounds ones run",
  ignore: emu === null || !ubsan,
  async fn() {
    const fine = await probe(5);
    assert(fine.ok, `the in-bounds probe failed:\n${fine.stderr}`);
    // Thread 0 reads tile[5] (thread 5's index) plus its local[5] (0 for thread 0).
    assertEquals(fine.stdout.trim(), "5");
    const shared = await probe(32);
    assert(!shared.ok, "a shared-array index of 32 in 32 ran to the end");
    assertMatch(shared.stderr, /runtime error: index 32 out of bounds for type 'int \[32\]'/);
    const local = await probe(12);
    assert(!local.ok, "a local-array index of 12 in 8 ran to the end");
    assertMatch(local.stderr, /runtime error: index 12 out of bounds for type 'int \[8\]'/);
  },
});
