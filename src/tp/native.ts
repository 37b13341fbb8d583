/**
 * The native half of tensor parallelism (kernels/cpu/{comm,spawn,watchdog}.c, declared in
 * nk_tp.h), opened from the CPU kernel library like the kernels themselves. Kept apart from
 * the kernel symbol table: nothing here computes, and the CUDA path needs it too.
 */

import { errorMessage } from "../common/errors.ts";
import { cpuLibraryPath } from "../backend/cpu/library.ts";
import { TpError } from "./errors.ts";

export const TP_SYMBOLS = {
  nk_comm_create: { parameters: ["buffer", "i32", "u64", "buffer"], result: "pointer" },
  nk_comm_open: { parameters: ["buffer", "i32", "i32", "buffer"], result: "pointer" },
  nk_comm_join: { parameters: ["pointer"], result: "i32" },
  nk_comm_unlink: { parameters: ["buffer"], result: "i32" },
  nk_comm_allreduce: { parameters: ["pointer", "pointer", "i64", "i32"], result: "i32" },
  nk_comm_broadcast: { parameters: ["pointer", "pointer", "i64", "i32"], result: "i32" },
  nk_comm_barrier: { parameters: ["pointer"], result: "i32" },
  nk_comm_abort: { parameters: ["pointer"], result: "i32" },
  nk_comm_failed_rank: { parameters: ["pointer"], result: "i32" },
  nk_comm_close: { parameters: ["pointer"], result: "void" },
  nk_spawn: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  nk_fd_write: { parameters: ["i32", "buffer", "i64", "i32"], result: "i32" },
  nk_fd_read: { parameters: ["i32", "buffer", "i64", "i32"], result: "i64" },
  nk_fd_close: { parameters: ["i32"], result: "i32" },
  nk_child_wait: { parameters: ["i32", "i32", "buffer"], result: "i32" },
  nk_child_kill: { parameters: ["i32", "i32"], result: "i32" },
  nk_die_with_parent: { parameters: [], result: "i32" },
  nk_watchdog_create: { parameters: ["buffer", "buffer", "pointer"], result: "pointer" },
  nk_watchdog_arm: { parameters: ["pointer", "i64"], result: "void" },
  nk_watchdog_disarm: { parameters: ["pointer"], result: "void" },
  nk_watchdog_fired: { parameters: ["pointer"], result: "i32" },
  nk_watchdog_destroy: { parameters: ["pointer"], result: "void" },
} as const;

export type TpSymbols = Deno.DynamicLibrary<typeof TP_SYMBOLS>["symbols"];

/** The collective's own failure codes (nk_tp.h). */
export const NK_COMM_EABORTED = -1001;
export const NK_COMM_EPEER = -1002;

export interface TpLibrary {
  path: string;
  sym: TpSymbols;
}

let opened: TpLibrary | null = null;

/** Opens the library once per isolate. */
export function tpLibrary(): TpLibrary {
  if (opened) return opened;
  let path: string;
  try {
    path = cpuLibraryPath();
    opened = { path, sym: Deno.dlopen(path, TP_SYMBOLS).symbols };
  } catch (err) {
    throw new TpError(
      "tp_unavailable",
      `cannot load the native tensor-parallel support from the CPU kernel library: ` +
        `${errorMessage(err)} (run \`deno task kernels:cpu\`)`,
      { cause: err },
    );
  }
  return opened;
}

const encoder = new TextEncoder();

/** A NUL-terminated copy of `s` for a `const char *` parameter. */
export function cString(s: string): Uint8Array<ArrayBuffer> {
  const bytes = encoder.encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

const ERRNO_NAMES: Record<number, string> = {
  1: "EPERM",
  2: "ENOENT",
  4: "EINTR",
  9: "EBADF",
  10: "ECHILD",
  11: "EAGAIN",
  12: "ENOMEM",
  13: "EACCES",
  17: "EEXIST",
  22: "EINVAL",
  24: "EMFILE",
  28: "ENOSPC",
  32: "EPIPE",
  110: "ETIMEDOUT",
};

/** "ENOENT (2)" for a negative errno result. */
export function errnoName(rc: number): string {
  const n = -rc;
  return `${ERRNO_NAMES[n] ?? "errno"} (${n})`;
}

export const ETIMEDOUT = -110;
export const EPIPE = -32;
