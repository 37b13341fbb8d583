import { assertEquals } from "../../tests/support/assert.ts";
import { BlockBuffer } from "./block_buffer.ts";

/** Feeds `sizes`-long chunks of a counting pattern; returns each write's [offset, length]. */
function writes(start: number, block: number, sizes: number[]): {
  spans: Array<[number, number]>;
  bytes: Uint8Array;
} {
  const buffer = new BlockBuffer(start, block);
  const spans: Array<[number, number]> = [];
  const out: number[] = [];
  let pos = start, value = 0;
  const write = (b: Uint8Array) => {
    spans.push([pos, b.byteLength]);
    pos += b.byteLength;
    out.push(...b);
  };
  for (const n of sizes) {
    const chunk = Uint8Array.from({ length: n }, () => value++ & 0xff);
    for (const b of buffer.fill(chunk)) write(b);
  }
  const tail = buffer.rest();
  if (tail.byteLength > 0) write(tail);
  return { spans, bytes: Uint8Array.from(out) };
}

Deno.test("BlockBuffer: every write but the last ends on a block boundary, bytes in order", () => {
  const sizes = [5, 3, 17, 1, 40, 2, 9];
  const { spans, bytes } = writes(0, 16, sizes);
  assertEquals(spans, [[0, 16], [16, 16], [32, 16], [48, 16], [64, 13]]);
  assertEquals(bytes, Uint8Array.from({ length: 77 }, (_, i) => i & 0xff));
});

Deno.test("BlockBuffer: a file resumed between boundaries is first filled up to the next one", () => {
  const { spans } = writes(21, 16, [4, 30, 3]);
  assertEquals(spans, [[21, 11], [32, 16], [48, 10]]);
});

Deno.test("BlockBuffer: chunks holding whole blocks are passed through without copying", () => {
  const buffer = new BlockBuffer(0, 8);
  const chunk = new Uint8Array(20);
  const blocks = [...buffer.fill(chunk)];
  assertEquals(blocks.map((b) => b.buffer === chunk.buffer), [true, true]);
  assertEquals(buffer.rest().byteLength, 4);
});
