/**
 * A copy of a fixture with its metadata changed (a looping chat template, an absurd
 * hyperparameter), for tests of what neuron does with such a file. Tensors are copied as
 * they are.
 */

import { type GgufKv, openGguf, writeGguf } from "../../src/gguf/mod.ts";

export type MetadataEdit = (kv: Map<string, GgufKv>) => void;

/** Writes `src` with `edit` applied to its metadata to `dst`; returns `dst`. */
export function writeVariant(src: string, dst: string, edit: MetadataEdit): string {
  const file = openGguf(src);
  try {
    const kv = new Map(file.kv);
    edit(kv);
    writeGguf(dst, {
      kv,
      tensors: file.tensors.map((t) => ({
        name: t.name,
        type: t.type,
        ne: t.ne,
        data: file.data(t),
      })),
    });
  } finally {
    file.close();
  }
  return dst;
}
