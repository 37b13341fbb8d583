import { assertEquals, assertMatch, assertThrows } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { GgufError } from "./errors.ts";
import type { GgufKv } from "./file.ts";
import { Kv } from "./kv.ts";
import { optionalIntArray, requireNumber, requireString } from "./metadata.ts";
import { openGguf, parseGgufBytes } from "./reader.ts";
import { GgmlType, GgufValueType } from "./types.ts";
import { encodeGguf, type GgufTensorSpec } from "./writer.ts";

function f32Tensor(name: string, n: number): GgufTensorSpec {
  return { name, type: GgmlType.F32, ne: [n], data: new Uint8Array(4 * n) };
}

function failure(bytes: Uint8Array): GgufError {
  return assertThrows(() => parseGgufBytes(bytes), GgufError);
}

function setU32(bytes: Uint8Array, at: number, v: number): Uint8Array {
  new DataView(bytes.buffer, bytes.byteOffset).setUint32(at, v, true);
  return bytes;
}

Deno.test("a mapped file and a file read into memory give the same metadata and data", () => {
  const path = fixture("qwen3-tiny-q4_0.gguf");
  const mapped = openGguf(path);
  const read = openGguf(path, { mmap: false });
  try {
    assertEquals(mapped.source.kind, "mmap");
    assertEquals(read.source.kind, "memory");
    assertEquals(mapped.kv, read.kv);
    assertEquals(mapped.tensors, read.tensors);
    for (const t of mapped.tensors) assertEquals(mapped.data(t), read.data(t), t.name);
  } finally {
    mapped.close();
    read.close();
  }
});

Deno.test("metadata accessors name the missing or mistyped key", () => {
  const file = parseGgufBytes(encodeGguf({
    kv: [
      ["n", Kv.u32(7)],
      ["s", Kv.string("x")],
      ["big", Kv.u64(2n ** 60n)],
      ["ids", Kv.array(GgufValueType.UINT16, new Uint16Array([1, 2]))],
    ],
    tensors: [],
  }));
  assertEquals(requireNumber(file, "n"), 7);
  assertEquals(Array.from(optionalIntArray(file, "ids")!), [1, 2]);
  const missing = assertThrows(() => requireString(file, "absent"), GgufError);
  assertEquals(missing.code, "gguf_missing_key");
  assertMatch(missing.message, /'absent'/);
  assertEquals(assertThrows(() => requireNumber(file, "s"), GgufError).code, "gguf_wrong_key_type");
  assertEquals(
    assertThrows(() => requireNumber(file, "big"), GgufError).code,
    "gguf_wrong_key_type",
  );
});

Deno.test("bad magic and unknown versions are refused at their offsets", () => {
  const good = encodeGguf({ kv: [], tensors: [] });
  const magic = failure(good.slice().fill(0x41, 0, 4));
  assertEquals([magic.code, magic.offset], ["gguf_bad_magic", 0]);
  const v4 = failure(setU32(good.slice(), 4, 4));
  assertEquals([v4.code, v4.offset], ["gguf_unsupported_version", 4]);
  assertMatch(failure(setU32(good.slice(), 4, 0x03000000)).message, /big-endian/);
  assertEquals(failure(good.subarray(0, 10)).code, "gguf_truncated");
});

Deno.test("tensors whose data overlap are refused at the second one's offset field", () => {
  const bytes = encodeGguf({ kv: [], tensors: [f32Tensor("a", 16), f32Tensor("b", 16)] });
  // Header 24 bytes; each info is name (8 + 1) | n_dims 4 | ne 8 | type 4 | offset 8 = 33.
  const offsetField = 24 + 33 + 9 + 4 + 8 + 4;
  setU32(bytes, offsetField, 0); // b's data now starts where a's does
  const err = failure(bytes);
  assertEquals([err.code, err.offset], ["gguf_bad_tensor", offsetField]);
});

Deno.test("empty tensors, nested arrays and version 2 files parse", () => {
  const nested: GgufKv = Kv.array(GgufValueType.ARRAY, [["a"], new Int32Array([1])]);
  const file = parseGgufBytes(encodeGguf({
    version: 2,
    kv: [["nested", nested]],
    tensors: [
      { name: "empty", type: GgmlType.Q4_K, ne: [256, 0], data: new Uint8Array(0) },
      f32Tensor("one", 1),
    ],
  }));
  assertEquals(file.version, 2);
  assertEquals(file.get("nested"), [["a"], new Int32Array([1])]);
  assertEquals(file.tensors.map((t) => [t.name, t.nElements, t.nBytes]), [["empty", 0, 0], [
    "one",
    1,
    4,
  ]]);
});

Deno.test("arrays nested deeper than 8 levels are refused", () => {
  let value: unknown = ["leaf"];
  for (let i = 0; i < 9; i++) value = [value];
  const bytes = encodeGguf({
    kv: [["deep", {
      type: GgufValueType.ARRAY,
      arrayType: GgufValueType.ARRAY,
      value: value as string[],
    }]],
    tensors: [],
  });
  assertEquals(failure(bytes).code, "gguf_too_large");
});
