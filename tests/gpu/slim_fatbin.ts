/**
 * Shrinks a CUDA library for one GPU generation: every image in its `.nv_fatbin` section
 * but the PTX of one architecture has its bytes zeroed, headers kept, so the runtime still
 * finds the one it loads (no SASS matches a GPU outside its generation, so an H200 JIT-
 * compiles the compute_90 PTX) and the zeros compress to nothing. llama.cpp's CUDA build
 * (node-llama-cpp's, 159 MB: PTX for 75/80/90, SASS for 86/89/120/121) gzips to 24 MB
 * with the compute_90 PTX alone, small enough to carry to a lent GPU beside Deno.
 *
 *   deno run -A tests/gpu/slim_fatbin.ts IN OUT [ARCH=90]
 */

const FATBIN_MAGIC = 0xba55ed50;
const KIND_PTX = 1;

export interface SlimReport {
  images: number;
  keptBytes: number;
  zeroedBytes: number;
}

/** The file offset and size of the ELF64 section `name`. */
export function elfSection(elf: Uint8Array, name: string): { offset: number; size: number } {
  const v = new DataView(elf.buffer, elf.byteOffset, elf.byteLength);
  if (v.getUint32(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) {
    throw new Error("not a little-endian ELF64 file");
  }
  const shoff = Number(v.getBigUint64(0x28, true));
  const shentsize = v.getUint16(0x3a, true), shnum = v.getUint16(0x3c, true);
  const shstrndx = v.getUint16(0x3e, true);
  const header = (i: number) => shoff + i * shentsize;
  const strings = Number(v.getBigUint64(header(shstrndx) + 24, true));
  const wanted = new TextEncoder().encode(`${name}\0`);
  for (let i = 0; i < shnum; i++) {
    const at = strings + v.getUint32(header(i), true);
    if (wanted.every((b, j) => elf[at + j] === b)) {
      return {
        offset: Number(v.getBigUint64(header(i) + 24, true)),
        size: Number(v.getBigUint64(header(i) + 32, true)),
      };
    }
  }
  throw new Error(`no ${name} section`);
}

/**
 * Zeroes, in place, the payload of every fatbin image in `elf` but the PTX for `arch`
 * (e.g. 90). Containers follow each other in the section, 8-byte aligned.
 */
export function slimFatbin(elf: Uint8Array, arch: number): SlimReport {
  const { offset, size } = elfSection(elf, ".nv_fatbin");
  const v = new DataView(elf.buffer, elf.byteOffset, elf.byteLength);
  const report: SlimReport = { images: 0, keptBytes: 0, zeroedBytes: 0 };
  for (let at = offset; at + 16 <= offset + size;) {
    if (v.getUint32(at, true) !== FATBIN_MAGIC) {
      at += 8;
      continue;
    }
    const start = at + v.getUint16(at + 6, true);
    const end = start + Number(v.getBigUint64(at + 8, true));
    for (let e = start; e < end;) {
      const kind = v.getUint16(e, true);
      const headerSize = v.getUint32(e + 4, true);
      const payload = Number(v.getBigUint64(e + 8, true));
      const imageArch = v.getUint32(e + 28, true);
      const body = e + headerSize;
      if (body + payload > end) throw new Error(`fatbin image at ${e} runs past its container`);
      report.images++;
      if (kind === KIND_PTX && imageArch === arch) {
        report.keptBytes += payload;
      } else {
        elf.fill(0, body, body + payload);
        report.zeroedBytes += payload;
      }
      e = body + payload;
    }
    at = end;
  }
  if (report.keptBytes === 0) throw new Error(`no compute_${arch} PTX in the fatbin`);
  return report;
}

if (import.meta.main) {
  const [input, output, arch = "90"] = Deno.args;
  if (!input || !output) {
    console.error("usage: slim_fatbin.ts IN OUT [ARCH]");
    Deno.exit(2);
  }
  const elf = Deno.readFileSync(input);
  const r = slimFatbin(elf, Number(arch));
  Deno.writeFileSync(output, elf);
  console.log(
    `${output}: ${r.images} images, compute_${arch} PTX kept (${r.keptBytes} bytes), ` +
      `${r.zeroedBytes} bytes zeroed`,
  );
}
