import { assert, assertEquals } from "../../tests/support/assert.ts";
import { hugeMappedBytes, hugePageShare, mappedHugeShare } from "./huge_pages.ts";
import { openSource } from "../gguf/source.ts";
import { testKernels } from "../../tests/support/cpu_kernels.ts";

const SMAPS = `7f0000000000-7f0000200000 r--p 00000000 fe:00 12 /lib/x.so
Rss:                 100 kB
FilePmdMapped:         0 kB
7f1000000000-7f1040000000 rw-p 00000000 fe:00 34 /models/m.gguf
Size:            1048576 kB
AnonHugePages:         0 kB
FilePmdMapped:     20480 kB
VmFlags: rd wr mr mw me hg
7f2000000000-7f2000001000 rw-p 00000000 00:00 0
FilePmdMapped:      2048 kB
`;

Deno.test("hugeMappedBytes reads the huge-page bytes of the mapping holding the address", () => {
  assertEquals(hugeMappedBytes(SMAPS, 0x7f1000123456n), 20480 * 1024);
  assertEquals(hugeMappedBytes(SMAPS, 0x7f0000000000n), 0);
  assertEquals(hugeMappedBytes(SMAPS, 0x7f3000000000n), null);
});

Deno.test("hugePageShare: a huge-page arena is on huge pages; a tiny range has no answer", async () => {
  const k = await testKernels();
  const huge = k.allocHuge(16 << 20);
  try {
    // Written, as weights copied there are (a read would map the shared zero page).
    huge.u8().fill(1);
    // Transparent huge pages may be off on a host: the arena then sits on small pages.
    const thp = Deno.readTextFileSync("/sys/kernel/mm/transparent_hugepage/enabled");
    if (!thp.includes("[never]")) assertEquals(hugePageShare(huge.pointer, 16 << 20), 1);
    assertEquals(hugePageShare(huge.pointer, 4096), null);
  } finally {
    huge.free();
  }
});

Deno.test("hugePageShare: a file cached from 4 KiB writes is mapped on small pages", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/small_writes.bin`;
  try {
    const f = Deno.openSync(path, { write: true, create: true });
    const block = new Uint8Array(4096).fill(7);
    for (let i = 0; i < 2048; i++) f.writeSync(block);
    f.close();
    const source = openSource(path);
    try {
      assertEquals(source.kind, "mmap");
      assertEquals(hugePageShare(source.pointer(0), source.size), 0);
    } finally {
      source.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("openSource re-caches a large file cached from 4 KiB writes, all of it into huge pages", async () => {
  const dir = await Deno.makeTempDir();
  const write = (path: string, chunk: number) => {
    const f = Deno.openSync(path, { write: true, create: true });
    const block = new Uint8Array(chunk).fill(3);
    for (let i = 0; i < (40 << 20) / chunk; i++) f.writeSync(block);
    f.close();
  };
  // Faulting nothing itself: only what openSource mapped counts.
  const share = (path: string, populate: boolean): number | null => {
    const source = openSource(path, { populate });
    try {
      return mappedHugeShare(source.pointer(0), source.size);
    } finally {
      source.close();
    }
  };
  try {
    // Where the file system or the kernel keeps no 2 MiB folios, there is nothing to gain.
    write(`${dir}/blocks.bin`, 8 << 20);
    if ((share(`${dir}/blocks.bin`, true) ?? 0) < 0.9) return;
    // A reader that wants the metadata only does not map (or read) the rest.
    assertEquals(share(`${dir}/blocks.bin`, false), 0);
    write(`${dir}/small_writes.bin`, 4096);
    const huge = share(`${dir}/small_writes.bin`, true) ?? 0;
    assert(huge >= 0.9, `${huge} of the file on huge pages`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
