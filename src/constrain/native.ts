/**
 * The CPU kernel library, where the mask walk and the mask's application run natively
 * (kernels/cpu/token_mask.c); null where it cannot be opened, and the TypeScript
 * references do the work.
 */

import { type CpuSymbols, openCpuLibrary } from "../backend/cpu/library.ts";

let library: CpuSymbols | null | undefined;

/** The library's symbols, opened once; null where it cannot be. */
export function nativeMasks(): CpuSymbols | null {
  if (library === undefined) {
    try {
      library = openCpuLibrary().symbols;
    } catch {
      library = null;
    }
  }
  return library;
}
