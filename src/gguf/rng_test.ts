import { assert, assertEquals, assertNotEquals } from "../../tests/support/assert.ts";
import { Rng } from "./rng.ts";

Deno.test("Rng is reproducible from its seed and differs between seeds", () => {
  const a = new Rng(42), b = new Rng(42), c = new Rng(43);
  const seqA = Array.from({ length: 8 }, () => a.u32());
  assertEquals(Array.from({ length: 8 }, () => b.u32()), seqA);
  assertNotEquals(Array.from({ length: 8 }, () => c.u32()), seqA);
  assert(seqA.every((v) => Number.isInteger(v) && v >= 0 && v < 2 ** 32));
});

Deno.test("Rng draws are uniform and normal with the right moments", () => {
  const rng = new Rng(7);
  const n = 100_000;
  let sum = 0, sumN = 0, sumN2 = 0;
  const buckets = new Array(10).fill(0);
  for (let i = 0; i < n; i++) {
    const u = rng.float();
    assert(u >= 0 && u < 1);
    sum += u;
    buckets[rng.int(10)]++;
    const z = rng.normal();
    sumN += z;
    sumN2 += z * z;
  }
  assert(Math.abs(sum / n - 0.5) < 0.01, `uniform mean ${sum / n}`);
  assert(buckets.every((k) => Math.abs(k - n / 10) < n / 100), `int buckets ${buckets}`);
  assert(Math.abs(sumN / n) < 0.02, `normal mean ${sumN / n}`);
  assert(Math.abs(sumN2 / n - 1) < 0.03, `normal variance ${sumN2 / n}`);
});

Deno.test("Rng.fill gives the same bytes at any alignment and length", () => {
  const aligned = new Uint8Array(64);
  new Rng(3).fill(aligned.subarray(0, 37));
  const backing = new Uint8Array(65);
  new Rng(3).fill(backing.subarray(1, 38));
  assertEquals(backing.subarray(1, 38), aligned.subarray(0, 37));
  assertEquals(aligned.subarray(37).every((b) => b === 0), true);
});
