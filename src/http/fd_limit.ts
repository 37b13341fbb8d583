/**
 * How many connections the process can hold without starving everything else of file
 * descriptors: model files, engine and tensor-parallel worker pipes, hub downloads and
 * upstream connections need theirs too.
 */

/** Assumed when the limit cannot be read (Linux's usual soft limit). */
const FALLBACK_LIMIT = 1024;
/** Enough for any node's workload; each connection also costs memory. */
const MOST = 4096;
const LEAST = 16;

/** The soft RLIMIT_NOFILE from /proc/self/limits; null where that cannot be read. */
export function openFileLimit(): number | null {
  try {
    const text = Deno.readTextFileSync("/proc/self/limits");
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(text);
    if (!m) return null;
    return m[1] === "unlimited" ? Number.MAX_SAFE_INTEGER : Number(m[1]);
  } catch {
    return null;
  }
}

/** The limit less a reserve of a quarter of it (at least 64), within [16, 4096]. */
export function connectionCap(limit: number | null): number {
  const fds = limit ?? FALLBACK_LIMIT;
  const reserve = Math.max(64, Math.floor(fds / 4));
  return Math.min(MOST, Math.max(LEAST, fds - reserve));
}
