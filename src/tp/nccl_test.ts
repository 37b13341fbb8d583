/**
 * The NCCL communicator where there is no GPU: every way in answers `cuda_unavailable`
 * (no driver) or `nccl_init_failed` (no NCCL), never a crash or a hang. Where a GPU is
 * present, tests/tp/nccl_gpu_test.ts covers the real thing.
 */
import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { CudaDriver } from "../backend/cuda/driver.ts";
import { NeuronError } from "../common/errors.ts";
import { COMM_ID_BYTES } from "./comm_id.ts";
import { TpError } from "./errors.ts";
import { ncclCandidates, NcclCommunicator, ncclUniqueId, openNccl } from "./nccl.ts";

function cudaPresent(): boolean {
  try {
    CudaDriver.open("libcuda.so.1").close();
    return true;
  } catch {
    return false;
  }
}

function ncclPresent(): boolean {
  try {
    openNccl();
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "nccl: without a CUDA driver, joining a group is cuda_unavailable",
  ignore: cudaPresent(),
  fn() {
    const id = new Uint8Array(COMM_ID_BYTES);
    const err = assertThrows(() => NcclCommunicator.init(id, 0, 1, { device: 0 }), NeuronError);
    assertEquals(err.code, "cuda_unavailable");
    assertMatch(err.message, /libcuda/);
  },
});

Deno.test({
  name: "nccl: without libnccl, minting an id is nccl_init_failed naming every place tried",
  ignore: ncclPresent(),
  fn() {
    const err = assertThrows(() => ncclUniqueId(), TpError);
    assertEquals(err.code, "nccl_init_failed");
    assertMatch(err.message, /^cannot load NCCL \(libnccl\.so\.2\): libnccl\.so\.2: /);
    const missing = assertThrows(() => openNccl("/nonexistent/libnccl.so.2"), TpError);
    assertMatch(missing.message, /\/nonexistent\/libnccl\.so\.2: /);
  },
});

Deno.test("nccl: a configured path is used as is; a bare name is tried first as given", () => {
  assertEquals(ncclCandidates("/opt/nccl/lib/libnccl.so.2"), ["/opt/nccl/lib/libnccl.so.2"]);
  const bare = ncclCandidates("libnccl.so.2");
  assertEquals(bare[0], "libnccl.so.2");
  for (const p of bare.slice(1)) assertMatch(p, /\/libnccl\.so\.2$/);
});
