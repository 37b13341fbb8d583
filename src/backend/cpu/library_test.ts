/**
 * The binding's edges: a missing library, inputs the kernels must refuse (and then leave
 * their outputs alone), and the thread pool's life cycle: an idle pool sleeps instead of
 * spinning, and pools come and go without leaking threads.
 */

import {
  assert,
  assertEquals,
  assertStringIncludes,
  assertThrows,
} from "../../../tests/support/assert.ts";
import { GgmlType, randomBlocks, Rng } from "../../gguf/mod.ts";
import { CpuKernelError } from "./errors.ts";
import { openCpuLibrary } from "./library.ts";
import { randomF32, testKernels } from "../../../tests/support/cpu_kernels.ts";

Deno.test("a missing library is cpu_kernels_unavailable and says how to build it", () => {
  const err = assertThrows(() => openCpuLibrary("/nonexistent/libneuron_cpu.so"), CpuKernelError);
  assertEquals(err.code, "cpu_kernels_unavailable");
  assertStringIncludes(err.message, "deno task kernels:cpu");
});

Deno.test("invalid matmul inputs are typed errors and leave the output untouched", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  const rng = new Rng(31);
  const w = randomBlocks(GgmlType.Q4_K, 4, rng);
  const x = randomF32(rng, 256);
  const y = new Float32Array(4).fill(7);
  const cases: Array<[string, () => void]> = [
    ["cols not a whole number of blocks", () => pool.matmul(GgmlType.Q4_K, w, 4, 128, x, 1, y)],
    ["weights too short", () => pool.matmul(GgmlType.Q4_K, w, 5, 256, x, 1, y)],
    ["activations too short", () => pool.matmul(GgmlType.Q4_K, w, 4, 256, x, 2, y)],
    ["output too short", () => pool.matmul(GgmlType.Q4_K, w, 4, 256, x, 1, y.subarray(1))],
    ["type not computable", () => pool.matmul(GgmlType.IQ2_XS, w, 4, 256, x, 1, y)],
    ["zero rows", () => pool.matmul(GgmlType.Q4_K, w, 0, 256, x, 1, y)],
    ["fractional tokens", () => pool.matmul(GgmlType.Q4_K, w, 4, 256, x, 0.5, y)],
  ];
  for (const [what, fn] of cases) {
    const err = assertThrows(fn, CpuKernelError);
    assertEquals(err.code, "cpu_kernel_invalid", what);
  }
  assertEquals(Array.from(y), [7, 7, 7, 7]);
  pool.destroy();
  assertThrows(() => pool.matmul(GgmlType.Q4_K, w, 4, 256, x, 1, y), CpuKernelError);
});

Deno.test("native buffers alias their views and refuse use after free", async () => {
  const k = await testKernels();
  const buf = k.alloc(1000);
  assertEquals(buf.u8().every((b) => b === 0), true);
  buf.f32()[3] = 1.5;
  assertEquals(new Float32Array(buf.u8().buffer)[3], 1.5);
  buf.free();
  assertThrows(() => buf.pointer, CpuKernelError);
});

/** CPU seconds this process has used (all threads), from /proc. */
/** CPU seconds used so far by the pool worker threads of this process (named "nk-pool"). */
function poolCpuSeconds(): number {
  let ticks = 0;
  for (const task of Deno.readDirSync("/proc/self/task")) {
    try {
      const stat = Deno.readTextFileSync(`/proc/self/task/${task.name}/stat`);
      if (!stat.includes("(nk-pool)")) continue;
      const fields = stat.split(") ")[1].split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The thread ended between listing and reading.
    }
  }
  return ticks / 100;
}

Deno.test("an idle pool sleeps: its workers use no CPU between ops", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  assertEquals(pool.threads, 2);
  const rng = new Rng(32);
  const w = randomBlocks(GgmlType.Q8_0, 1024 * 32, rng);
  const x = randomF32(rng, 1024), y = new Float32Array(1024);
  pool.matmul(GgmlType.Q8_0, w, 1024, 1024, x, 1, y);
  await new Promise((r) => setTimeout(r, 100));
  const before = poolCpuSeconds();
  await new Promise((r) => setTimeout(r, 600));
  const used = poolCpuSeconds() - before;
  // A worker spinning through the wait would burn 0.6 s.
  assert(used < 0.1, `idle pool used ${used} s of CPU in 0.6 s`);
  pool.destroy();
});

Deno.test("pools are created and destroyed repeatedly; each keeps its own level", async () => {
  const k = await testKernels();
  const before = Deno.readDirSync("/proc/self/task").toArray().length;
  for (let i = 0; i < 20; i++) {
    const a = k.createPool(2), b = k.createPool(3);
    a.isa = "scalar";
    assertEquals(a.isa, "scalar");
    assertEquals(b.isa, k.bestIsa());
    a.destroy();
    b.destroy();
  }
  // A pool that kept one worker would leave 40 threads behind; test modules running beside
  // this one in the process (--parallel) may start or end a few of their own meanwhile.
  const grown = Deno.readDirSync("/proc/self/task").toArray().length - before;
  assert(grown < 8, `${grown} more threads after 40 pools came and went`);
});
