/**
 * llama.cpp loaded once per test file: the libraries opened, the chosen CPU backend (and,
 * in a CUDA build, the CUDA backend) registered, the build checked, and llama.cpp's log
 * silenced by a native logger (quiet_log.ts says why it cannot be a JavaScript callback).
 */

import { LlamaRefError } from "./errors.ts";
import { LOG_HINT, quietLogger } from "./quiet_log.ts";
import {
  GGML_BASE_SYMBOLS,
  GGML_CPU_SYMBOLS,
  GGML_SYMBOLS,
  SYMBOLS,
  THREADPOOL_PARAMS,
} from "./abi.ts";
import { cpuVariant, GGML_COMMIT, llamaBinaries } from "./package.ts";

export type LlamaSymbols = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

export interface LlamaLibrary {
  symbols: LlamaSymbols;
  /** The CPU backend in use, e.g. "zen4". */
  cpuVariant: string;
  /** What to say of llama.cpp's log in an error (it is off in tests: quiet_log.ts). */
  takeLog(): string;
  /**
   * A CPU threadpool of `threads` whose idle threads sleep instead of spinning (poll 0):
   * llama.cpp's default spins between graphs, which on a small machine running tests in
   * parallel takes the cores the other tests need. Free it with `freeThreadpool`.
   */
  sleepingThreadpool(threads: number): Deno.PointerObject;
  freeThreadpool(pool: Deno.PointerObject): void;
}

/** A NUL-terminated UTF-8 copy of `s`, for `const char *` parameters. */
export function cString(s: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(s);
  // Over its own ArrayBuffer: small typed arrays may live on the moving heap otherwise.
  const out = new Uint8Array(new ArrayBuffer(bytes.length + 1));
  out.set(bytes);
  return out;
}

async function load(): Promise<LlamaLibrary> {
  // libggml-base installs a std::terminate handler as it loads (a backtrace for uncaught
  // C++ exceptions) and asserts that the handler installed is not its own. Probing the CPU
  // variants loads and unloads it, leaving the handler of an unloaded copy; when the next
  // copy maps at the same address (it does once the CUDA emulator shares the process) the
  // assertion aborts the process. ggml's switch leaves the handler out; nothing else changes.
  Deno.env.set("GGML_NO_BACKTRACE", "1");
  const bins = await llamaBinaries();
  const variant = cpuVariant(bins);
  let base, ggml, llama;
  try {
    base = Deno.dlopen(bins.ggmlBase, GGML_BASE_SYMBOLS);
    ggml = Deno.dlopen(bins.ggml, GGML_SYMBOLS);
    llama = Deno.dlopen(bins.llama, SYMBOLS);
  } catch (err) {
    throw new LlamaRefError(
      "llama_ref_unavailable",
      `cannot open llama.cpp from ${bins.dir}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const commitPtr = base.symbols.ggml_commit();
  const commit = commitPtr === null ? "" : Deno.UnsafePointerView.getCString(commitPtr);
  if (commit !== GGML_COMMIT) {
    throw new LlamaRefError(
      "llama_ref_version",
      `libggml is commit ${commit}, the binding mirrors llama.h of ${GGML_COMMIT}`,
    );
  }
  const log = { take: (): string => LOG_HINT };
  llama.symbols.llama_log_set(await quietLogger(), null);
  llama.symbols.llama_backend_init();
  if (ggml.symbols.ggml_backend_load(new TextEncoder().encode(`${variant.path}\0`)) === null) {
    throw new LlamaRefError(
      "llama_ref_unavailable",
      `llama.cpp's ${variant.name} CPU backend did not load: ${log.take()}`,
    );
  }
  if (
    bins.cuda !== undefined &&
    ggml.symbols.ggml_backend_load(new TextEncoder().encode(`${bins.cuda}\0`)) === null
  ) {
    throw new LlamaRefError(
      "llama_ref_unavailable",
      `llama.cpp's CUDA backend (${bins.cuda}) did not load: ${log.take()}`,
    );
  }
  const cpu = Deno.dlopen(variant.path, GGML_CPU_SYMBOLS);
  const sleepingThreadpool = (threads: number): Deno.PointerObject => {
    const params = new Uint8Array(THREADPOOL_PARAMS.bytes);
    const view = new DataView(params.buffer);
    view.setInt32(THREADPOOL_PARAMS.n_threads, threads, true);
    view.setUint32(THREADPOOL_PARAMS.poll, 0, true);
    const pool = cpu.symbols.ggml_threadpool_new(params);
    if (pool === null) {
      throw new LlamaRefError("llama_ref_unavailable", `no threadpool: ${log.take()}`);
    }
    return pool;
  };
  return {
    symbols: llama.symbols,
    cpuVariant: variant.name,
    takeLog: log.take,
    sleepingThreadpool,
    freeThreadpool: (pool) => cpu.symbols.ggml_threadpool_free(pool),
  };
}

let loading: Promise<LlamaLibrary> | undefined;

/** The process's llama.cpp, loaded on first use (a failed load is retried next time). */
export function llamaLibrary(): Promise<LlamaLibrary> {
  loading ??= load().catch((err) => {
    loading = undefined;
    throw err;
  });
  return loading;
}
