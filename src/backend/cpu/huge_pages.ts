/**
 * Whether weights read in place sit on huge pages. A file mapping gets a 2 MiB page
 * wherever the page cache holds the file in 2 MiB folios: files neuron writes itself
 * (common/block_buffer.ts) and files first read through its mapping (gguf/source.ts advises
 * huge pages). A file cached from small writes (just copied in with cp, say) keeps 4 KiB
 * pages until the cache drops it. The kernels prefetch differently on each
 * (nk_pool_set_page_prefetch), so the backend asks: it faults in a few 2 MiB-aligned
 * samples of the weights and reads from /proc/self/smaps how the kernel mapped them.
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
 * True when the weights at `pointer` (`bytes` long) are mapped mostly with huge pages, false
 * when mostly with small ones, null when that cannot be told (no whole huge page in the range, no
 * /proc).
 */
export function onHugePages(pointer: Deno.PointerObject, bytes: number): boolean | null {
  const start = Deno.UnsafePointer.value(pointer);
  const first = (start + BigInt(HUGE_PAGE - 1)) & ~BigInt(HUGE_PAGE - 1);
  const pages = Math.floor((Number(start - first) + bytes) / HUGE_PAGE);
  if (pages < 1) return null;
  const view = new Deno.UnsafePointerView(pointer);
  const samples = Math.min(SAMPLES, pages);
  for (let i = 0; i < samples; i++) {
    const page = Math.floor((i * pages) / samples);
    view.getUint8(Number(first - start) + page * HUGE_PAGE);
  }
  let smaps: string;
  try {
    smaps = Deno.readTextFileSync("/proc/self/smaps");
  } catch {
    return null;
  }
  const huge = hugeMappedBytes(smaps, start);
  // The majority decides: reclaim may have split a few of a file's folios.
  return huge === null ? null : 2 * huge >= samples * HUGE_PAGE;
}
