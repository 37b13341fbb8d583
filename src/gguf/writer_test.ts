import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { GgufError } from "./errors.ts";
import type { GgufKv } from "./file.ts";
import { Kv } from "./kv.ts";
import { parseGgufBytes } from "./reader.ts";
import { GgmlType, GgufValueType } from "./types.ts";
import { encodeGguf, type GgufSpec, type GgufTensorSpec, writeGguf } from "./writer.ts";

const EVERY_TYPE: Array<[string, GgufKv]> = [
  ["u8", Kv.u8(255)],
  ["i8", Kv.i8(-128)],
  ["u16", Kv.u16(65535)],
  ["i16", Kv.i16(-32768)],
  ["u32", Kv.u32(4294967295)],
  ["i32", Kv.i32(-2147483648)],
  ["u64.small", Kv.u64(12345)],
  ["u64.big", Kv.u64(2n ** 64n - 1n)],
  ["i64.big", Kv.i64(-(2n ** 63n))],
  ["f32", Kv.f32(Math.fround(0.1))],
  ["f64", Kv.f64(0.1)],
  ["bool", Kv.bool(true)],
  ["string", Kv.string("héllo ✓ \u{1F600}")],
  ["empty.string", Kv.string("")],
  ["arr.u8", Kv.array(GgufValueType.UINT8, new Uint8Array([0, 255]))],
  ["arr.i16", Kv.array(GgufValueType.INT16, new Int16Array([-1, 2]))],
  ["arr.u32.plain", Kv.array(GgufValueType.UINT32, [1, 2, 3])],
  ["arr.f32", Kv.array(GgufValueType.FLOAT32, new Float32Array([1.5, -0]))],
  ["arr.f64", Kv.array(GgufValueType.FLOAT64, new Float64Array([Math.PI]))],
  ["arr.u64", Kv.array(GgufValueType.UINT64, new BigUint64Array([2n ** 63n]))],
  ["arr.i64", Kv.array(GgufValueType.INT64, new BigInt64Array([-5n]))],
  ["arr.bool", Kv.array(GgufValueType.BOOL, [true, false])],
  ["arr.string", Kv.strings(["a", "", "ü"])],
  ["arr.empty", Kv.strings([])],
  [
    "arr.nested",
    Kv.array(GgufValueType.ARRAY, [new Int16Array([7, -7]), ["x", "y"], [new Uint8Array([9])]]),
  ],
];

function tensor(name: string, type: number, ne: number[], fill = 1): GgufTensorSpec {
  const nBytes = (ne.reduce((a, b) => a * b, 1) / (type === GgmlType.Q8_0 ? 32 : 1)) *
    (type === GgmlType.Q8_0 ? 34 : type === GgmlType.F16 ? 2 : 4);
  // Shapes the writer must reject get no data: the check comes first.
  const valid = Number.isSafeInteger(nBytes) && nBytes >= 0 && nBytes < 2 ** 20;
  return { name, type, ne, data: new Uint8Array(valid ? nBytes : 0).fill(fill) };
}

function code(fn: () => unknown): string {
  return assertThrows(fn, GgufError).code;
}

Deno.test("every metadata type is written with its type and read back unchanged", () => {
  const file = parseGgufBytes(encodeGguf({ kv: EVERY_TYPE, tensors: [] }));
  assertEquals(file.kv.size, EVERY_TYPE.length);
  for (const [key, kv] of EVERY_TYPE) {
    const got = file.kv.get(key)!;
    assertEquals(got.type, kv.type, key);
    assertEquals(got.arrayType, kv.arrayType, key);
    const want = key === "arr.u32.plain"
      ? new Uint32Array([1, 2, 3])
      : key === "u64.small"
      ? 12345
      : kv.value;
    assertEquals(got.value, want, key);
  }
});

Deno.test("tensors land aligned, in order, with their data", () => {
  const spec: GgufSpec = {
    kv: [["general.alignment", Kv.u32(64)]],
    tensors: [
      tensor("a", GgmlType.F32, [3], 1),
      tensor("b", GgmlType.Q8_0, [32, 2], 2),
      tensor("c", GgmlType.F16, [5, 1, 1], 3),
    ],
  };
  const bytes = encodeGguf(spec);
  const file = parseGgufBytes(bytes);
  assertEquals(file.alignment, 64);
  assertEquals(file.tensors.map((t) => [t.name, t.type.name, t.ne, t.relativeOffset]), [
    ["a", "F32", [3], 0],
    ["b", "Q8_0", [32, 2], 64],
    ["c", "F16", [5, 1, 1], 192],
  ]);
  assert(file.dataOffset % 64 === 0);
  for (const [i, t] of file.tensors.entries()) {
    assert(file.data(t).every((b) => b === i + 1), t.name);
  }
  assertEquals(bytes.byteLength, file.dataOffset + 192 + 64);
});

Deno.test("a producer's chunks of any size give the same file as whole bytes", () => {
  const whole = tensor("w", GgmlType.F32, [7, 3]);
  const data = new Uint8Array(84).map((_, i) => i);
  const streamed: GgufTensorSpec = {
    ...whole,
    data: (write) => {
      for (let i = 0; i < data.length; i += 5) write(data.subarray(i, i + 5));
    },
  };
  assertEquals(
    encodeGguf({ kv: [], tensors: [streamed] }),
    encodeGguf({ kv: [], tensors: [{ ...whole, data }] }),
  );
});

Deno.test("version 2 files have the same layout and say so", () => {
  const file = parseGgufBytes(encodeGguf({ version: 2, kv: [["k", Kv.u32(1)]], tensors: [] }));
  assertEquals(file.version, 2);
  assertEquals(file.get("k"), 1);
});

Deno.test("values that do not fit their declared type are rejected", () => {
  const bad: GgufKv[] = [
    Kv.u8(256),
    Kv.i8(-129),
    Kv.u32(-1),
    Kv.i32(1.5),
    Kv.u64(-1),
    Kv.i64(2n ** 63n),
    Kv.u64(2 ** 60),
    { type: GgufValueType.STRING, value: 5 },
    { type: GgufValueType.BOOL, value: 1 },
    { type: GgufValueType.FLOAT32, value: "1" },
    Kv.array(GgufValueType.UINT8, [1, 256]),
    Kv.array(GgufValueType.STRING, [1] as unknown as number[]),
  ];
  for (const kv of bad) {
    assertEquals(
      code(() => encodeGguf({ kv: [["k", kv]], tensors: [] })),
      "gguf_bad_value",
      String(kv.value),
    );
  }
  assertEquals(
    code(() => encodeGguf({ kv: [["k", { type: GgufValueType.ARRAY, value: [] }]], tensors: [] })),
    "gguf_bad_value_type",
  );
  assertEquals(
    code(() => encodeGguf({ kv: [["k", { type: 13 as 0, value: 1 }]], tensors: [] })),
    "gguf_bad_value_type",
  );
});

Deno.test("bad tensors and alignments are rejected before anything is written", () => {
  const kv: Array<[string, GgufKv]> = [];
  const cases: Array<[GgufSpec, string]> = [
    [
      { kv, tensors: [tensor("t", GgmlType.F32, [2]), tensor("t", GgmlType.F32, [2])] },
      "gguf_duplicate_tensor",
    ],
    [{ kv, tensors: [{ ...tensor("t", GgmlType.F32, [2]), type: 4 }] }, "gguf_unknown_tensor_type"],
    [{ kv, tensors: [tensor("t", GgmlType.Q8_0, [16, 2])] }, "gguf_bad_tensor"],
    [{ kv, tensors: [tensor("t", GgmlType.F32, [1, 1, 1, 1, 1])] }, "gguf_bad_tensor"],
    [{ kv, tensors: [tensor("t", GgmlType.F32, [-1])] }, "gguf_bad_tensor"],
    [{ kv, tensors: [tensor("t", GgmlType.F32, [2 ** 30, 2 ** 30, 2 ** 30])] }, "gguf_too_large"],
    [{ kv: [["general.alignment", Kv.u32(48)]], tensors: [] }, "gguf_bad_alignment"],
    [{ kv: [["general.alignment", Kv.i32(32)]], tensors: [] }, "gguf_bad_alignment"],
  ];
  for (const [spec, want] of cases) assertEquals(code(() => encodeGguf(spec)), want);
});

Deno.test("writeGguf streams to disk and leaves nothing behind when a tensor is wrong", () => {
  const dir = Deno.makeTempDirSync({ prefix: "neuron-gguf-" });
  try {
    const path = `${dir}/model.gguf`;
    const good = tensor("t", GgmlType.F32, [8]);
    const layout = writeGguf(path, { kv: EVERY_TYPE, tensors: [good] });
    assertEquals(Deno.readFileSync(path), encodeGguf({ kv: EVERY_TYPE, tensors: [good] }));
    assertEquals(layout.size, Deno.statSync(path).size);

    const short: GgufTensorSpec = { ...good, data: (write) => write(new Uint8Array(31)) };
    const long: GgufTensorSpec = { ...good, data: (write) => write(new Uint8Array(33)) };
    for (const t of [short, long]) {
      const other = `${dir}/bad.gguf`;
      assertEquals(code(() => writeGguf(other, { kv: [], tensors: [t] })), "gguf_bad_tensor");
      assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), ["model.gguf"]);
    }
    assertEquals(
      code(() => writeGguf(`${dir}/missing/dir.gguf`, { kv: [], tensors: [] })),
      "gguf_io",
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
