/**
 * The bandwidth probe (kernels/cpu/bandwidth.c): every access pattern reads exactly the
 * bytes the plain reference loop reads, at every level and thread count, whatever the
 * buffer's alignment and length; and the probe gives a figure.
 */

import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { Rng } from "../../gguf/mod.ts";
import { CpuKernelError } from "./errors.ts";
import { READ_PATTERNS } from "./pool.ts";
import { everyPool, testKernels } from "../../../tests/support/cpu_kernels.ts";

/** The wrapping sum of the little-endian 64-bit words of `bytes`, in TypeScript. */
function wordSum(bytes: Uint8Array): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let sum = 0n;
  for (let o = 0; o < bytes.byteLength; o += 8) sum += view.getBigUint64(o, true);
  return BigInt.asUintN(64, sum);
}

Deno.test("every read pattern sums the words exactly as the plain loop does", async () => {
  const rng = new Rng(17);
  const buffer = Uint8Array.from({ length: 3 * 65536 }, () => rng.int(256));
  const base = Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buffer)));
  assertEquals(base % 8, 0, "the test buffer is word aligned");
  // Every skew from a 64-byte boundary, lengths around the 256-byte blocks and the shares.
  const offsets = [0, 8, 16, 24, 32, 40, 48, 56];
  const lengths = [0, 8, 56, 64, 248, 256, 264, 4096, 4096 + 200, 65536 + 8, 2 * 65536];
  const cases = offsets.flatMap((offset) =>
    lengths.map((length) => {
      const data = buffer.subarray(offset, offset + length);
      return { data, expected: wordSum(data), what: `${length} bytes at +${offset}` };
    })
  );
  await everyPool((pool, what) => {
    for (const { data, expected, what: where } of cases) {
      for (const pattern of READ_PATTERNS) {
        assertEquals(pool.readChecksum(data, pattern), expected, `${what} ${pattern}: ${where}`);
      }
    }
  });
});

Deno.test("the checksum refuses a partial word or an unknown pattern", async () => {
  const pool = (await testKernels()).createPool(1);
  try {
    const data = new Uint8Array(64);
    assertThrows(() => pool.readChecksum(data.subarray(0, 12), "stream"), CpuKernelError);
    assertThrows(
      () => pool.readChecksum(data, "backwards" as (typeof READ_PATTERNS)[number]),
      CpuKernelError,
    );
  } finally {
    pool.destroy();
  }
});

Deno.test("the probe measures a positive, finite read rate", async () => {
  const pool = (await testKernels()).createPool(2);
  try {
    const gbs = pool.bandwidth(8 << 20, 1);
    assert(Number.isFinite(gbs) && gbs > 0, `${gbs} GB/s`);
  } finally {
    pool.destroy();
  }
});
