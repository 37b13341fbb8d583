import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { blockKey, BlockPool } from "./block_pool.ts";

Deno.test("blocks are handed out, shared, and returned", () => {
  const pool = new BlockPool(4, 16);
  const a = pool.allocate()!, b = pool.allocate()!;
  assert(a !== b);
  assertEquals(pool.held, 2);
  pool.retain(a);
  pool.release(a);
  assertEquals(pool.held, 2, "still held once");
  pool.release(a);
  pool.release(b);
  assertEquals(pool.available, 4);
  assertThrows(() => pool.release(b));
  assertThrows(() => pool.retain(9));
});

Deno.test("registered blocks are found by content, survive release, and are evicted LRU", () => {
  const pool = new BlockPool(3, 2);
  const tokens = [[1, 2], [3, 4], [5, 6]];
  const keys: string[] = [];
  const blocks = tokens.map((t, i) => {
    const b = pool.allocate()!;
    keys.push(blockKey(keys[i - 1] ?? "", t));
    pool.register(b, keys[i], t);
    return b;
  });
  for (const b of blocks) pool.release(b);
  assertEquals(pool.available, 3);
  assertEquals(pool.cached, 3);
  assertEquals(pool.lookup(keys[1], [3, 4]), blocks[1]);
  assertEquals(pool.lookup(keys[1], [3, 5]), null, "a key collision never serves other tokens");
  // Reuse block 1: it is held again, so the next allocations evict 0 then 2.
  pool.retain(blocks[1]);
  assertEquals(pool.allocate(), blocks[0]);
  assertEquals(pool.allocate(), blocks[2]);
  assertEquals(pool.allocate(), null);
  assertEquals(pool.lookup(keys[0], [1, 2]), null, "evicted content is forgotten");
  assertEquals(pool.prefixStats, { lookups: 3, hits: 1 });
});

Deno.test("block keys chain: the same block after different prefixes differs", () => {
  const a = blockKey(blockKey("", [1, 2]), [3, 4]);
  const b = blockKey(blockKey("", [9, 2]), [3, 4]);
  assert(a !== b);
  assertEquals(a, blockKey(blockKey("", [1, 2]), [3, 4]));
});

Deno.test("a block registered by its first tokens serves the longest match, until evicted", () => {
  const pool = new BlockPool(3, 4);
  const parent = blockKey("", [1, 2, 3, 4]);
  const short = pool.allocate()!, long = pool.allocate()!;
  pool.registerPartial(short, parent, [5]);
  pool.registerPartial(long, parent, [5, 6, 7]);
  assertEquals(pool.lookupPartial(parent, [5, 6, 7, 8], 3), { block: long, count: 3 });
  assertEquals(pool.lookupPartial(parent, [5, 6, 7, 8], 2), { block: short, count: 1 }, "at most");
  assertEquals(pool.lookupPartial(parent, [5, 9], 3), { block: short, count: 1 });
  assertEquals(pool.lookupPartial("other", [5, 6, 7], 3), null, "only after its own parent");
  assertEquals(pool.cached, 2);
  // Released, a partly registered block is kept for reuse like a whole one, then evicted.
  pool.release(short);
  pool.release(long);
  assertEquals(pool.available, 3);
  assertEquals(pool.allocate(), 2, "the free block first");
  assertEquals(pool.allocate(), short, "then the oldest cached one");
  assertEquals(pool.lookupPartial(parent, [5, 6, 7], 3), { block: long, count: 3 });
  assertEquals(pool.allocate(), long);
  assertEquals(pool.lookupPartial(parent, [5, 6, 7], 3), null);
  assertEquals(pool.cached, 0);
});
