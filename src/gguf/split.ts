/**
 * Split GGUF models, as llama.cpp's gguf-split writes them: `{prefix}-00001-of-00003.gguf`
 * and its siblings, each a GGUF file of its own carrying `split.no` (0-based) and
 * `split.count`; the first holds the model's metadata and `split.tensors.count`, every
 * part a share of the tensors. Like llama.cpp, the model is opened by its first part and
 * the others are found beside it by name. The parts become one GgufFile whose byte source
 * lays them end to end, so tensor offsets and pointers work as in a single file.
 */

import { GgufError } from "./errors.ts";
import { GgufFile, type GgufTensorInfo } from "./file.ts";
import type { ByteSource } from "./source.ts";

export const SPLIT_NO = "split.no";
export const SPLIT_COUNT = "split.count";
export const SPLIT_TENSORS_COUNT = "split.tensors.count";

const PART_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

/** `split.count` of a file: 0 when it is not split. */
export function splitCount(file: GgufFile): number {
  const n = file.get(SPLIT_COUNT);
  return typeof n === "number" ? n : 0;
}

/** The path of every part, from the first part's path (llama.cpp's split naming). */
export function splitPartPaths(first: string, count: number): string[] {
  const m = PART_NAME.exec(first);
  if (!m || Number(m[2]) !== 1 || Number(m[3]) !== count) {
    throw new GgufError(
      "gguf_bad_split",
      `${first} has ${SPLIT_COUNT} = ${count}: open a split model by its first part, ` +
        `named {prefix}-00001-of-${String(count).padStart(5, "0")}.gguf`,
    );
  }
  const of = String(count).padStart(5, "0");
  return Array.from(
    { length: count },
    (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${of}.gguf`,
  );
}

/** The parts' sources one after another in one offset space; no view spans two parts. */
class ConcatSource implements ByteSource {
  readonly kind: "mmap" | "memory";
  readonly size: number;
  readonly #parts: ByteSource[];
  readonly #bases: number[];

  constructor(parts: ByteSource[]) {
    this.#parts = parts;
    this.kind = parts[0].kind;
    let base = 0;
    this.#bases = parts.map((p) => {
      const at = base;
      base += p.size;
      return at;
    });
    this.size = base;
  }

  base(part: number): number {
    return this.#bases[part];
  }

  #locate(offset: number, length: number): [ByteSource, number] {
    let i = this.#bases.length - 1;
    while (i > 0 && this.#bases[i] > offset) i--;
    const local = offset - this.#bases[i];
    if (offset < 0 || local + length > this.#parts[i].size) {
      throw new GgufError(
        "gguf_truncated",
        `range [${offset}, ${offset + length}) does not lie within one part of the split model`,
        offset,
      );
    }
    return [this.#parts[i], local];
  }

  view(offset: number, length: number): Uint8Array {
    const [part, local] = this.#locate(offset, length);
    return part.view(local, length);
  }

  pointer(offset: number): Deno.PointerObject {
    const [part, local] = this.#locate(offset, 0);
    return part.pointer(local);
  }

  close(): void {
    for (const p of this.#parts) p.close();
  }
}

function partNo(file: GgufFile, path: string): number {
  const no = file.get(SPLIT_NO);
  if (typeof no !== "number") {
    throw new GgufError(
      "gguf_bad_split",
      `${path} has no ${SPLIT_NO}: not a part of a split model`,
    );
  }
  return no;
}

/**
 * The split model whose first part is `first` (already parsed from `path`), its other
 * parts parsed by `open`. Parts are checked as llama.cpp checks them: each one's
 * `split.no`, no tensor twice, and the tensor count the first part announces.
 */
export function joinSplit(
  first: GgufFile,
  path: string,
  open: (path: string) => GgufFile,
): GgufFile {
  const count = splitCount(first);
  const no = partNo(first, path);
  if (no !== 0) {
    throw new GgufError(
      "gguf_bad_split",
      `${path} is part ${no + 1} of a split model: open it by its first part`,
    );
  }
  const paths = splitPartPaths(path, count);
  const parts = [first];
  try {
    for (let i = 1; i < count; i++) {
      const part = open(paths[i]);
      parts.push(part);
      if (partNo(part, paths[i]) !== i || splitCount(part) !== count) {
        throw new GgufError(
          "gguf_bad_split",
          `${paths[i]} says it is part ${partNo(part, paths[i]) + 1} of ${splitCount(part)}, ` +
            `expected part ${i + 1} of ${count}`,
        );
      }
    }
    const source = new ConcatSource(parts.map((p) => p.source));
    const tensors: GgufTensorInfo[] = [];
    const seen = new Set<string>();
    parts.forEach((part, i) => {
      for (const t of part.tensors) {
        if (seen.has(t.name)) {
          throw new GgufError(
            "gguf_duplicate_tensor",
            `tensor '${t.name}' appears twice in the parts of ${path}`,
          );
        }
        seen.add(t.name);
        tensors.push({ ...t, offset: source.base(i) + t.offset });
      }
    });
    const expected = first.get(SPLIT_TENSORS_COUNT);
    if (typeof expected === "number" && expected !== tensors.length) {
      throw new GgufError(
        "gguf_bad_split",
        `${path}: ${SPLIT_TENSORS_COUNT} is ${expected}, the ${count} parts hold ${tensors.length}`,
      );
    }
    return new GgufFile(
      first.version,
      first.kv,
      tensors,
      first.alignment,
      first.dataOffset,
      source,
      path,
    );
  } catch (err) {
    for (const p of parts) p.close();
    throw err;
  }
}
