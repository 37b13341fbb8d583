import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { KvBlocks } from "./kv_blocks.ts";

Deno.test("blocks are reserved for whole positions and returned", () => {
  const kv = new KvBlocks(10, 16);
  const a = kv.allocate(17)!;
  assertEquals(a.length, 2);
  const b = kv.allocate(16 * 8)!;
  assertEquals(b.length, 8);
  assertEquals(kv.freeBlocks, 0);
  assertEquals(kv.allocate(1), null);
  assertEquals(new Set([...a, ...b]).size, 10);
  kv.release(a);
  kv.release(b);
  assertEquals(kv.freeBlocks, 10);
  assert(kv.fitsInPool(160) && !kv.fitsInPool(161));
});

Deno.test("returning more blocks than the pool holds is an error", () => {
  const kv = new KvBlocks(2, 16);
  const a = kv.allocate(1)!;
  kv.release(a);
  assertThrows(() => kv.release(a));
  assertThrows(() => new KvBlocks(2, 16).release(Int32Array.of(5)));
});
