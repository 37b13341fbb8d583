/**
 * The launch limits of every kernel we ship, per flavour, for the emulator's cuLaunchKernel
 * to enforce as the real driver does: `.maxntid` from the PTX, and from the cubin ptxas
 * made of it (kernels/build_cuda.ts, `ptxas -arch=sm_N -O3`, what the loader uses on that
 * GPU) the registers per thread and the static shared memory. A cubin keeps a kernel's
 * register count as an EIATTR_REGCOUNT attribute in `.nv.info` (what `ptxas -v` prints as
 * "Used N registers"; no cuobjdump needed) and its static shared memory as the size of
 * `.nv.shared.<name>`. The table is compiled into the emulator (limitsSource).
 */

import { CUDA_BUILD_DIR, FLAVOURS } from "../../../kernels/build_cuda.ts";

export interface KernelLimits {
  /** Compute capability of the flavour, e.g. 90. */
  arch: number;
  name: string;
  /** Threads per block the PTX allows (`.maxntid` product); 1024 without one. */
  maxThreads: number;
  registers: number;
  staticShared: number;
}

/** `.maxntid` of each entry of a PTX text (entries without one are absent). */
export function ptxMaxThreads(ptx: string): Map<string, number> {
  const out = new Map<string, number>();
  const re = /\.entry\s+(\w+)\s*\([^)]*\)\s*((?:\.\w+[^\n{]*\n\s*)*)\{/g;
  for (let m = re.exec(ptx); m !== null; m = re.exec(ptx)) {
    const n = /\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?/.exec(m[2]);
    if (n) out.set(m[1], Number(n[1]) * Number(n[2] ?? 1) * Number(n[3] ?? 1));
  }
  return out;
}

const EIATTR_REGCOUNT = 0x2f;
const EIFMT_NVAL = 1;
const EIFMT_SVAL = 4;

/** Registers and static shared memory of each kernel of a cubin (an ELF64 image). */
export function cubinResources(
  img: Uint8Array,
): Map<string, { registers: number; staticShared: number }> {
  const dv = new DataView(img.buffer, img.byteOffset, img.byteLength);
  const shoff = Number(dv.getBigUint64(0x28, true));
  const shentsize = dv.getUint16(0x3a, true);
  const shnum = dv.getUint16(0x3c, true);
  const header = (i: number) => {
    const at = shoff + i * shentsize;
    return {
      name: dv.getUint32(at, true),
      type: dv.getUint32(at + 4, true),
      offset: Number(dv.getBigUint64(at + 24, true)),
      size: Number(dv.getBigUint64(at + 32, true)),
      link: dv.getUint32(at + 40, true),
    };
  };
  const cString = (at: number): string => {
    let end = at;
    while (img[end] !== 0) end++;
    return new TextDecoder().decode(img.subarray(at, end));
  };
  const sections = Array.from({ length: shnum }, (_, i) => header(i));
  const shstr = sections[dv.getUint16(0x3e, true)].offset;
  const named = sections.map((h) => ({ ...h, title: cString(shstr + h.name) }));
  const symtab = named.find((h) => h.type === 2)!;
  const symbol = (i: number): string =>
    cString(sections[symtab.link].offset + dv.getUint32(symtab.offset + 24 * i, true));
  const out = new Map<string, { registers: number; staticShared: number }>();
  const entry = (k: string) => {
    let e = out.get(k);
    if (!e) out.set(k, e = { registers: 0, staticShared: 0 });
    return e;
  };
  for (const h of named) {
    if (h.title.startsWith(".nv.shared.")) entry(h.title.slice(11)).staticShared = h.size;
    if (h.title !== ".nv.info") continue;
    // Attributes: u8 format, u8 id, then nothing (NVAL), a u16 (BVAL, HVAL), or a u16 size
    // and that many bytes (SVAL); a register count is (symbol index, count) as u32s.
    for (let p = h.offset; p < h.offset + h.size;) {
      const format = img[p], id = img[p + 1];
      if (format === EIFMT_NVAL) {
        p += 2;
        continue;
      }
      if (format !== EIFMT_SVAL) {
        p += 4;
        continue;
      }
      const size = dv.getUint16(p + 2, true);
      if (id === EIATTR_REGCOUNT) {
        entry(symbol(dv.getUint32(p + 4, true))).registers = dv.getUint32(p + 8, true);
      }
      p += 4 + size;
    }
  }
  return out;
}

/** The limits of every kernel of every flavour built in kernels/build. */
export function kernelLimits(): KernelLimits[] {
  const out: KernelLimits[] = [];
  for (const flavour of FLAVOURS) {
    const dir = `${CUDA_BUILD_DIR}${flavour.name}/`;
    const manifest = JSON.parse(Deno.readTextFileSync(`${dir}manifest.json`)) as {
      modules: Array<{ ptx: string; cubin: string; entries: Record<string, string[]> }>;
    };
    for (const m of manifest.modules) {
      const maxThreads = ptxMaxThreads(Deno.readTextFileSync(`${dir}${m.ptx}`));
      const resources = cubinResources(Deno.readFileSync(`${dir}${m.cubin}`));
      for (const name of Object.keys(m.entries).sort()) {
        const r = resources.get(name);
        if (!r || r.registers === 0) {
          throw new Error(`${flavour.name}/${m.cubin}: no register count for ${name}`);
        }
        out.push({
          arch: flavour.cc,
          name,
          maxThreads: maxThreads.get(name) ?? 1024,
          ...r,
        });
      }
    }
  }
  return out;
}

/** The table as a C++ source for the emulator (emu_limits.h). */
export function limitsSource(limits: KernelLimits[]): string {
  const rows = limits.map((l) =>
    `    {${l.arch}, "${l.name}", ${l.maxThreads}, ${l.registers}, ${l.staticShared}},`
  );
  return [
    "/* Generated by tests/cuda/emu/kernel_limits.ts from kernels/build: do not edit. */",
    '#include "emu_limits.h"',
    "const EmuLimits emu_limits[] = {",
    ...rows,
    "};",
    `const int emu_limits_count = ${limits.length};`,
    "",
  ].join("\n");
}
