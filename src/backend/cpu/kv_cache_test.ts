import { assert, assertEquals } from "../../../tests/support/assert.ts";
import { testKernels } from "../../../tests/support/cpu_kernels.ts";
import { CpuBackend } from "./cpu_backend.ts";
import type { NativeBuffer } from "./native_buffer.ts";

Deno.test("a KV cache on huge pages is backed when it is made, not by the decode steps that first write it", async () => {
  await testKernels();
  const be = new CpuBackend({ threads: 2 });
  try {
    const rss = (): number => Deno.memoryUsage().rss;
    const before = rss();
    // 8 MiB for each of K and V in each of 4 layers.
    const cache = be.createKvCache({
      nLayers: 4,
      nKvHeads: 8,
      headDim: 128,
      nBlocks: 256,
      blockSize: 16,
      dtype: "f16",
    });
    const grown = rss() - before;
    assert(grown >= 0.9 * cache.bytes, `resident memory grew ${grown} bytes for ${cache.bytes}`);
    const { k, v } = cache as unknown as { k: NativeBuffer[]; v: NativeBuffer[] };
    for (const b of [...k, ...v]) {
      const u8 = b.u8();
      assertEquals([u8[0], u8[u8.length >> 1], u8[u8.length - 1]], [0, 0, 0], "still zero");
    }
  } finally {
    be.close();
  }
});
