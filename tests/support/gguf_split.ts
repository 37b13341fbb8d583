/**
 * A model fixture written as a split GGUF, the way llama.cpp's `gguf-split --split` writes
 * one: `{prefix}-0000i-of-0000n.gguf`, the tensors in file order cut into `n` runs, the first
 * part with the model's metadata, every part with `split.no` (u16, 0-based), `split.count`
 * (u16) and `split.tensors.count` (i32).
 */

import { type GgufKv, GgufValueType, openGguf, writeGguf } from "../../src/gguf/mod.ts";

function splitKeys(no: number, count: number, tensors: number): [string, GgufKv][] {
  return [
    ["split.no", { type: GgufValueType.UINT16, value: no }],
    ["split.count", { type: GgufValueType.UINT16, value: count }],
    ["split.tensors.count", { type: GgufValueType.INT32, value: tensors }],
  ];
}

/** Writes `src` as `count` parts beside `prefix`; returns their paths, first part first. */
export function writeSplitGguf(src: string, prefix: string, count: number): string[] {
  const file = openGguf(src);
  try {
    const n = file.tensors.length;
    const of = String(count).padStart(5, "0");
    return Array.from({ length: count }, (_, i) => {
      const path = `${prefix}-${String(i + 1).padStart(5, "0")}-of-${of}.gguf`;
      const run = file.tensors.slice(
        Math.floor((i * n) / count),
        Math.floor(((i + 1) * n) / count),
      );
      const kv = i === 0 ? [...file.kv, ...splitKeys(i, count, n)] : splitKeys(i, count, n);
      writeGguf(path, {
        kv,
        tensors: run.map((t) => ({ name: t.name, type: t.type, ne: t.ne, data: file.data(t) })),
      });
      return path;
    });
  } finally {
    file.close();
  }
}
