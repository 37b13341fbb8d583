/**
 * The binding layer without a GPU: an absent or unusable libcuda is `cuda_unavailable`
 * with the loader's reason (never a silent fallback for `cuda`; a logged one for `auto`),
 * flavour selection by compute capability, CUresult names, library search.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { captureLogs } from "../../src/common/log.ts";
import { createBackend } from "../../src/backend/mod.ts";
import {
  createCudaBackend,
  CudaError,
  CudaUnavailableError,
  cuResultName,
} from "../../src/backend/cuda/mod.ts";
import { selectFlavour } from "../../src/backend/cuda/flavour.ts";
import { expandPattern, libraryCandidates } from "../../src/backend/cuda/libraries.ts";

function gpuHere(): boolean {
  try {
    createCudaBackend().close();
    return true;
  } catch {
    return false;
  }
}

const hasGpu = gpuHere();

Deno.test("an absent libcuda is cuda_unavailable naming the path and the loader's reason", () => {
  const err = assertThrows(
    () => createCudaBackend({ libcuda: "/nonexistent/dir/libcuda.so.1" }),
    CudaUnavailableError,
  );
  assertEquals(err.code, "cuda_unavailable");
  assert(err instanceof CudaError);
  assertMatch(
    err.message,
    /^CUDA is unavailable: cannot load libcuda \(\/nonexistent\/dir\/libcuda\.so\.1\): /,
  );
  assertMatch(err.message, /No such file or directory|cannot open shared object/);
});

Deno.test({
  name:
    "device cuda without a GPU fails with cuda_unavailable; auto serves on the CPU and says why",
  ignore: hasGpu,
  fn() {
    const err = assertThrows(() => createBackend("cuda", { threads: 1 }), CudaUnavailableError);
    assertEquals(err.code, "cuda_unavailable");
    const lines: string[] = [];
    const stop = captureLogs((l) => lines.push(l));
    try {
      const be = createBackend("auto", { threads: 1 });
      assertEquals(be.kind, "cpu");
      be.close();
    } finally {
      stop();
    }
    const line = lines.find((l) => l.includes("device auto: using the CPU"));
    assert(line !== undefined, `no log line saying why: ${lines.join("\n")}`);
    assertMatch(line, /cannot load libcuda/);
  },
});

Deno.test("flavour selection: the newest flavour not newer than the device", () => {
  const all = ["sm_89", "sm_90", "sm_120"];
  const pick = (cc: number, avail = all): string => {
    const c = selectFlavour(cc, avail);
    return `${c.flavour.name}${c.exact ? "" : " (jit)"}`;
  };
  assertEquals(pick(89), "sm_89");
  assertEquals(pick(90), "sm_90");
  assertEquals(pick(100), "sm_90 (jit)");
  assertEquals(pick(103), "sm_90 (jit)");
  assertEquals(pick(120), "sm_120");
  assertEquals(pick(121), "sm_120 (jit)");
  assertEquals(pick(90, ["sm_89"]), "sm_89 (jit)");
  assertEquals(pick(120, ["sm_89", "sm_90"]), "sm_90 (jit)");
});

Deno.test("flavour selection: a GPU older than every flavour, or no build, is a clear error", () => {
  const old = assertThrows(
    () => selectFlavour(86, ["sm_89", "sm_90", "sm_120"]),
    CudaUnavailableError,
  );
  assertEquals(
    old.message,
    "CUDA is unavailable: no kernel flavour runs on compute capability 8.6: this build has " +
      "sm_89 (ada, 8.9), sm_90 (hopper, 9.0), sm_120 (blackwell, 12.0); a GPU of compute " +
      "capability 8.9 or newer is needed",
  );
  const hopperOnly = assertThrows(() => selectFlavour(89, ["sm_90"]), CudaUnavailableError);
  assertMatch(hopperOnly.message, /compute capability 8\.9: this build has sm_90 \(hopper, 9\.0\)/);
  const none = assertThrows(() => selectFlavour(90, []), CudaUnavailableError);
  assertMatch(none.message, /deno task kernels:cuda/);
});

Deno.test("CUresult numbers map to their cuda.h names", () => {
  assertEquals(cuResultName(0), "CUDA_SUCCESS");
  assertEquals(cuResultName(1), "CUDA_ERROR_INVALID_VALUE");
  assertEquals(cuResultName(2), "CUDA_ERROR_OUT_OF_MEMORY");
  assertEquals(cuResultName(34), "CUDA_ERROR_STUB_LIBRARY");
  assertEquals(cuResultName(100), "CUDA_ERROR_NO_DEVICE");
  assertEquals(cuResultName(209), "CUDA_ERROR_NO_BINARY_FOR_GPU");
  assertEquals(cuResultName(222), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
  assertEquals(cuResultName(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
  assertEquals(cuResultName(716), "CUDA_ERROR_MISALIGNED_ADDRESS");
  assertEquals(cuResultName(719), "CUDA_ERROR_LAUNCH_FAILED");
  assertEquals(cuResultName(901), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
  assertEquals(cuResultName(999), "CUDA_ERROR_UNKNOWN");
  assertEquals(cuResultName(4242), "CUresult 4242");
});

Deno.test("library search: a path is used as is; a soname goes to the loader first", async () => {
  assertEquals(libraryCandidates("libcublas", "/opt/x/libcublas.so.13"), [
    "/opt/x/libcublas.so.13",
  ]);
  assertEquals(libraryCandidates("libcuda", "libcuda.so.1")[0], "libcuda.so.1");
  const dir = await Deno.makeTempDir();
  try {
    for (const d of ["nvidia/cublas/lib", "nvidia/cu13/lib", "nvidia/other/bin"]) {
      await Deno.mkdir(`${dir}/site/${d}`, { recursive: true });
    }
    assertEquals(expandPattern(`${dir}/site/nvidia/*/lib`), [
      `${dir}/site/nvidia/cu13/lib`,
      `${dir}/site/nvidia/cublas/lib`,
    ]);
    assertEquals(expandPattern(`${dir}/nope/*/lib`), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
