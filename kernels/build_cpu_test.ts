/**
 * The kernel build (kernels/build_cpu.ts): a missing compiler is a clear typed error that
 * leaves the built library alone, and an unchanged tree builds nothing.
 */

import { assertEquals, assertRejects, assertStringIncludes } from "../tests/support/assert.ts";
import { buildCpuKernels, CPU_LIBRARY_PATH, KernelBuildError } from "./build_cpu.ts";
import { testKernels } from "../tests/support/cpu_kernels.ts";

Deno.test("a missing C compiler is gcc_missing and leaves the library in place", async () => {
  await testKernels();
  const before = Deno.statSync(CPU_LIBRARY_PATH).mtime;
  const err = await assertRejects(
    () => buildCpuKernels({ cc: "/nonexistent/bin/gcc", force: true }),
    KernelBuildError,
  );
  assertEquals(err.code, "gcc_missing");
  assertStringIncludes(err.message, "install gcc");
  assertEquals(Deno.statSync(CPU_LIBRARY_PATH).mtime, before);
});

Deno.test("an up-to-date library is not rebuilt", async () => {
  await testKernels();
  const result = await buildCpuKernels();
  assertEquals(result.rebuilt, false);
  assertEquals(result.path, CPU_LIBRARY_PATH);
});
