/**
 * Whether memory is mapped with huge pages. A file mapping gets a 2 MiB page wherever the
 * page cache holds the file in 2 MiB folios: files neuron writes itself (block_buffer.ts)
 * and files first read through its mapping (gguf/source.ts advises huge pages). A file
 * cached from small writes (just copied in with cp, say) keeps 4 KiB pages until the cache
 * drops it. Weights streamed from 4 KiB pages decode 10-20% slower, so the GGUF reader
 * re-caches such a file and the CPU backend picks its prefetch distances by what it finds
 * (nk_pool_set_page_prefetch). Both ask /proc/self/smaps how the kernel mapped them: the
 * reader about its whole mapping once populated, the backend about a few 2 MiB-aligned
 * samples it faults in.
 */

const HUGE_PAGE = 2 << 20;
const SAMPLES = 8;

/** How many bytes of the mapping holding `address` are mapped by 2 MiB pages (smaps'
 * FilePmdMapped plus AnonHugePages); null when no mapping holds it. */
export function hugeMappedBytes(smaps: string, address: bigint): number | null {
  let inside = false;
  let huge = 0;
  for (const line of smaps.split("\n")) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (range) {
      if (inside) return huge;
      inside = BigInt(`0x${range[1]}`) <= address && address < BigInt(`0x${range[2]}`);
      continue;
    }
    const field = /^(FilePmdMapped|AnonHugePages):\s+(\d+) kB/.exec(line);
    if (inside && field) huge += Number(field[2]) * 1024;
  }
  return inside ? huge : null;
}

/**
 * The share (0 to 1) of 8 samples of [pointer, pointer + bytes), one per 2 MiB spread
 * over the range, that the kernel mapped with huge pages; null when that cannot be told
 * (no whole huge page in the range, no /proc). Faults the samples in.
 */
export function hugePageShare(pointer: Deno.PointerObject, bytes: number): number | null {
  const { first, pages } = wholePages(pointer, bytes);
  if (pages < 1) return null;
  const view = new Deno.UnsafePointerView(pointer);
  const start = Deno.UnsafePointer.value(pointer);
  const samples = Math.min(SAMPLES, pages);
  for (let i = 0; i < samples; i++) {
    const page = Math.floor((i * pages) / samples);
    view.getUint8(Number(first - start) + page * HUGE_PAGE);
  }
  // The whole mapping's count: pages faulted earlier elsewhere in it count too.
  const huge = mappingHugeBytes(start);
  return huge === null ? null : Math.min(1, huge / (samples * HUGE_PAGE));
}

/**
 * The share (0 to 1) of the whole 2 MiB pages of [pointer, pointer + bytes) mapped by huge
 * pages now, faulting nothing; null when that cannot be told. Counts the whole mapping that
 * holds `pointer`: meant for a range that is a mapping of its own, already populated.
 */
export function mappedHugeShare(pointer: Deno.PointerObject, bytes: number): number | null {
  const { pages } = wholePages(pointer, bytes);
  if (pages < 1) return null;
  const huge = mappingHugeBytes(Deno.UnsafePointer.value(pointer));
  return huge === null ? null : Math.min(1, huge / (pages * HUGE_PAGE));
}

/** The first 2 MiB boundary in the range and how many whole huge pages follow it. */
function wholePages(pointer: Deno.PointerObject, bytes: number): { first: bigint; pages: number } {
  const start = Deno.UnsafePointer.value(pointer);
  const first = (start + BigInt(HUGE_PAGE - 1)) & ~BigInt(HUGE_PAGE - 1);
  return { first, pages: Math.floor((Number(start - first) + bytes) / HUGE_PAGE) };
}

function mappingHugeBytes(address: bigint): number | null {
  try {
    return hugeMappedBytes(Deno.readTextFileSync("/proc/self/smaps"), address);
  } catch {
    return null;
  }
}
