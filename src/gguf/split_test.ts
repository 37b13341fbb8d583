import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { writeSplitGguf } from "../../tests/support/gguf_split.ts";
import { GgufError } from "./errors.ts";
import type { GgufFile } from "./file.ts";
import { openGguf } from "./reader.ts";
import { GgufValueType } from "./types.ts";
import { writeGguf } from "./writer.ts";

const SOURCE = fixture("qwen3-tiny-q8_0.gguf");

async function withParts(fn: (parts: string[], dir: string) => void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "neuron-split-" });
  try {
    fn(writeSplitGguf(SOURCE, `${dir}/tiny-Q8_0`, 3), dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function bytesAt(file: GgufFile, name: string): Uint8Array {
  const t = file.requireTensor(name);
  return new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(file.pointer(t), t.nBytes)).slice();
}

function failure(fn: () => unknown): GgufError {
  return assertThrows(fn, GgufError);
}

Deno.test("a split model opens by its first part: the whole model's metadata and tensors", async () => {
  await withParts((parts) => {
    assertEquals(parts.map((p) => p.slice(p.lastIndexOf("/") + 1)), [
      "tiny-Q8_0-00001-of-00003.gguf",
      "tiny-Q8_0-00002-of-00003.gguf",
      "tiny-Q8_0-00003-of-00003.gguf",
    ]);
    const whole = openGguf(SOURCE);
    for (const mmap of [true, false]) {
      const split = openGguf(parts[0], { mmap });
      try {
        assertEquals(split.path, parts[0]);
        for (const [key, kv] of whole.kv) assertEquals(split.kv.get(key), kv, key);
        assertEquals(split.get("split.count"), 3);
        assertEquals(split.tensors.map((t) => t.name), whole.tensors.map((t) => t.name));
        assertEquals(split.tensorBytes, whole.tensorBytes);
        const sizes = parts.reduce((sum, p) => sum + Deno.statSync(p).size, 0);
        assertEquals(split.size, sizes);
        for (const t of whole.tensors) {
          assertEquals(split.data(split.requireTensor(t.name)), whole.data(t), t.name);
        }
        // Kernels read weights through pointers: each lands in its own part's bytes.
        if (mmap) {
          for (const t of [whole.tensors[0], whole.tensors.at(-1)!]) {
            assertEquals(bytesAt(split, t.name), whole.data(t), `${t.name} by pointer`);
          }
        }
      } finally {
        split.close();
      }
    }
    whole.close();
  });
});

Deno.test("a split model with a part missing, out of place or short of tensors is refused", async () => {
  await withParts((parts, dir) => {
    const second = failure(() => openGguf(parts[1]));
    assertEquals(second.code, "gguf_bad_split");
    assertStringIncludes(second.message, "first part");

    // Parts renamed: the second file found says it is the third.
    Deno.renameSync(parts[1], `${dir}/held`);
    Deno.renameSync(parts[2], parts[1]);
    const swapped = failure(() => openGguf(parts[0]));
    assertEquals(swapped.code, "gguf_bad_split");
    assertStringIncludes(swapped.message, "part 3 of 3, expected part 2 of 3");

    Deno.renameSync(parts[1], parts[2]);
    const missing = failure(() => openGguf(parts[0]));
    assertEquals(missing.code, "gguf_io");
    assertStringIncludes(missing.message, parts[1]);
    Deno.renameSync(`${dir}/held`, parts[1]);
    openGguf(parts[0]).close();

    // A first part that names itself otherwise than llama.cpp's naming is not guessed at.
    Deno.copyFileSync(parts[0], `${dir}/renamed.gguf`);
    assertEquals(failure(() => openGguf(`${dir}/renamed.gguf`)).code, "gguf_bad_split");

    // A part that lost its tensors: the count the first part announces no longer holds.
    const first = openGguf(parts[0]);
    const n = first.get("split.tensors.count");
    first.close();
    writeGguf(parts[2], {
      kv: [
        ["split.no", { type: GgufValueType.UINT16, value: 2 }],
        ["split.count", { type: GgufValueType.UINT16, value: 3 }],
        ["split.tensors.count", { type: GgufValueType.INT32, value: n as number }],
      ],
      tensors: [],
    });
    const short = failure(() => openGguf(parts[0]));
    assertEquals(short.code, "gguf_bad_split");
    assertStringIncludes(short.message, "split.tensors.count");
  });
});
