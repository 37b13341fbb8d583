/**
 * Where a GGUF file's bytes live: a private memory mapping of the file (zero-copy, the
 * default) or, where mapping is impossible (no FFI permission, exotic file systems), the
 * whole file read into memory. Views handed out stay valid until `close()`.
 *
 * The mapping is MAP_PRIVATE with PROT_READ|PROT_WRITE: pages are shared with the page
 * cache until written, and a stray write through a view copies one page instead of
 * killing the process with SIGSEGV, as a read-only mapping would.
 */

import { mappedHugeShare } from "../common/huge_pages.ts";
import { log } from "../common/log.ts";
import { GgufError } from "./errors.ts";

export interface ByteSource {
  readonly kind: "mmap" | "memory";
  readonly size: number;
  /** Bytes [offset, offset + length) without copying. */
  view(offset: number, length: number): Uint8Array;
  /** Native address of byte `offset`, for kernels that read weights in place. */
  pointer(offset: number): Deno.PointerObject;
  /** Releases the mapping or buffer; every view handed out becomes invalid. */
  close(): void;
}

const PROT_READ = 1;
const PROT_WRITE = 2;
const MAP_PRIVATE = 2;
const O_RDONLY = 0;
const O_CLOEXEC = 0o2000000;
const MADV_WILLNEED = 3;
const MADV_DONTNEED = 4;
const MADV_HUGEPAGE = 14;
const MADV_POPULATE_READ = 22;
const POSIX_FADV_DONTNEED = 4;
/** Files from this size on are re-cached (recache()) when, populated, less than this share
 * of them sits on huge pages. */
const RECACHE_MIN_BYTES = 32 << 20;
const RECACHE_BELOW = 0.97;
/** Files up to this share of the available memory are populated at open (populate()). */
const POPULATE_MAX_SHARE = 0.5;

const LIBC_SYMBOLS = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  mmap: {
    parameters: ["pointer", "usize", "i32", "i32", "i32", "i64"],
    result: "pointer",
  },
  munmap: { parameters: ["pointer", "usize"], result: "i32" },
  madvise: { parameters: ["pointer", "usize", "i32"], result: "i32" },
  posix_fadvise: { parameters: ["i32", "i64", "i64", "i32"], result: "i32" },
  fdatasync: { parameters: ["i32"], result: "i32" },
} as const;

type Libc = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>["symbols"];
let libc: Libc | null | undefined;

function loadLibc(): Libc | null {
  if (libc !== undefined) return libc;
  try {
    libc = Deno.dlopen("libc.so.6", LIBC_SYMBOLS).symbols;
  } catch {
    libc = null;
  }
  return libc;
}

function checkRange(size: number, offset: number, length: number): void {
  if (
    !Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 ||
    offset + length > size
  ) {
    throw new GgufError(
      "gguf_truncated",
      `range [${offset}, ${offset + length}) lies outside the file of ${size} bytes`,
      offset,
    );
  }
}

class MappedSource implements ByteSource {
  readonly kind = "mmap" as const;
  #base: Deno.PointerObject | null;

  constructor(readonly size: number, base: Deno.PointerObject, private readonly libc: Libc) {
    this.#base = base;
  }

  #live(): Deno.PointerObject {
    if (this.#base === null) throw new GgufError("gguf_io", "file mapping already closed");
    return this.#base;
  }

  view(offset: number, length: number): Uint8Array {
    checkRange(this.size, offset, length);
    if (length === 0) return new Uint8Array(0);
    const buf = Deno.UnsafePointerView.getArrayBuffer(this.#live(), length, offset);
    return new Uint8Array(buf);
  }

  pointer(offset: number): Deno.PointerObject {
    checkRange(this.size, offset, 0);
    const p = Deno.UnsafePointer.offset(this.#live(), offset);
    if (p === null) throw new GgufError("gguf_io", "null pointer into mapping");
    return p;
  }

  close(): void {
    if (this.#base === null) return;
    this.libc.munmap(this.#base, BigInt(this.size));
    this.#base = null;
  }
}

class MemorySource implements ByteSource {
  readonly kind = "memory" as const;
  readonly size: number;
  #bytes: Uint8Array | null;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.size = bytes.byteLength;
  }

  #live(): Uint8Array {
    if (this.#bytes === null) throw new GgufError("gguf_io", "file buffer already released");
    return this.#bytes;
  }

  view(offset: number, length: number): Uint8Array {
    checkRange(this.size, offset, length);
    return this.#live().subarray(offset, offset + length);
  }

  pointer(offset: number): Deno.PointerObject {
    checkRange(this.size, offset, 0);
    const bytes = this.#live();
    const p = Deno.UnsafePointer.of(bytes.subarray(offset));
    if (p === null) throw new GgufError("gguf_io", "cannot take the address of an empty buffer");
    return p;
  }

  close(): void {
    this.#bytes = null;
  }
}

/** Wraps bytes already in memory (tests, fuzzing, freshly written files). */
export function memorySource(bytes: Uint8Array): ByteSource {
  return new MemorySource(bytes);
}

function mapFile(path: string, size: number, options: SourceOptions): ByteSource | null {
  const c = loadLibc();
  if (c === null || size === 0) return null;
  const cpath = new TextEncoder().encode(path + "\0");
  const fd = c.open(cpath, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return null;
  try {
    const base = c.mmap(null, BigInt(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0n);
    // MAP_FAILED is (void*)-1.
    if (base === null || Deno.UnsafePointer.value(base) === 0xffffffffffffffffn) return null;
    // Pages the file's first read brings in then come as 2 MiB folios, mapped as huge
    // pages: the CPU kernels stream weights 10-20% faster for the fewer page walks. Files
    // already cached keep the folios they were written or read in (block_buffer.ts).
    c.madvise(base, BigInt(size), MADV_HUGEPAGE);
    if (options.populate && populate(c, base, size) && size >= RECACHE_MIN_BYTES) {
      const share = mappedHugeShare(base, size) ?? 1;
      if (share < RECACHE_BELOW) {
        recache(c, fd, base, size, share);
        populate(c, base, size);
      }
    }
    return new MappedSource(size, base, c);
  } finally {
    c.close(fd);
  }
}

/**
 * Drops a file cached in small folios from the page cache (and from this mapping), so
 * that populate() reads it again, in 2 MiB folios. Dirty pages (a file just written) are
 * written back first: the kernel drops only clean ones, and keeps pages others map.
 */
function recache(
  c: Libc,
  fd: number,
  base: Deno.PointerObject,
  size: number,
  hugeShare: number,
): void {
  log.info("model file cached on small pages: reading it again into huge pages", {
    mib: Math.round(size / 2 ** 20),
    huge_share: Math.round(hugeShare * 1000) / 1000,
  });
  c.fdatasync(fd);
  c.madvise(base, BigInt(size), MADV_DONTNEED);
  c.posix_fadvise(fd, 0n, BigInt(size), POSIX_FADV_DONTNEED);
}

/**
 * Maps every page of the file now, reading what is not cached in file order through the
 * huge-page mapping: 99.5% of a cold Qwen3-0.6B file then sits in 2 MiB folios. Faults
 * left to the first forward pass come in the kernels' order from several threads, and
 * their readahead put 4-6% of the file in small folios (decode ran 3-4% slower); WILLNEED
 * readahead picks folio sizes of its own too. False, with readahead started instead, for
 * a file too large for half the available memory (populating it would push its own first
 * pages out, to be read twice) or a kernel without MADV_POPULATE_READ (before 5.14).
 */
function populate(c: Libc, base: Deno.PointerObject, size: number): boolean {
  if (size <= availableMemory() * POPULATE_MAX_SHARE) {
    if (c.madvise(base, BigInt(size), MADV_POPULATE_READ) === 0) return true;
  }
  c.madvise(base, BigInt(size), MADV_WILLNEED);
  return false;
}

/** Bytes of memory available without swapping; 0 when the sys permission is denied. */
function availableMemory(): number {
  try {
    return Deno.systemMemoryInfo().available;
  } catch {
    return 0;
  }
}

export interface SourceOptions {
  /** False: read the whole file into memory instead of mapping it, as when mapping fails. */
  mmap?: boolean;
  /** The caller will read all of the file (it loads the model): map all of it at once,
   * on huge pages (populate()). Otherwise pages come in as they are read. */
  populate?: boolean;
}

/** Opens `path` as a byte source: memory-mapped unless `mmap` is false or mapping fails,
 * in which case the file is read into memory. */
export function openSource(path: string, options: SourceOptions = {}): ByteSource {
  let size: number;
  try {
    const stat = Deno.statSync(path);
    if (!stat.isFile) throw new GgufError("gguf_io", `${path} is not a regular file`);
    size = stat.size;
  } catch (err) {
    if (err instanceof GgufError) throw err;
    throw new GgufError("gguf_io", `cannot open ${path}: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
  if (options.mmap !== false) {
    const mapped = mapFile(path, size, options);
    if (mapped !== null) return mapped;
  }
  try {
    return new MemorySource(Deno.readFileSync(path));
  } catch (err) {
    throw new GgufError("gguf_io", `cannot read ${path}: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
}
