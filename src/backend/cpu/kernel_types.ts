/**
 * The weight types the CPU kernels take by id: ggml's, and the repacked layouts of
 * kernels/cpu/repack.c (sixteen rows interleaved), whose ids are the library's, not ggml's.
 * A leaf, so that the checks and the library wrapper can name types without importing the
 * repacking (repacked.ts), which sits above them.
 */

import { GgmlType, ggmlTypeInfo } from "../../gguf/mod.ts";

/** The repacked types by library id: their name and the ggml type they come from. */
export const REPACKED_TYPES: ReadonlyMap<number, { name: string; base: number }> = new Map([
  [0x108, { name: "Q8_0_R16", base: GgmlType.Q8_0 }],
  [0x10c, { name: "Q4_K_R16", base: GgmlType.Q4_K }],
  [0x10e, { name: "Q6_K_R16", base: GgmlType.Q6_K }],
]);

/** Rows of a repacked matrix come in groups of this many. */
export const REPACK_ROWS = 16;

/** The name of a type the kernels take (ggml's or a repacked one), or null. */
export function kernelTypeName(type: number): string | null {
  return ggmlTypeInfo(type)?.name ?? REPACKED_TYPES.get(type)?.name ?? null;
}
