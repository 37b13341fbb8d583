/**
 * A native logger for llama.cpp that keeps nothing. llama_log_set is process-wide, and test
 * files run in one process, each in its own isolate: a JavaScript callback set by one file
 * dangles once that file's isolate is gone, and the next line llama.cpp logs from another
 * file crashes the process (SIGSEGV in deno). So the callback is C, compiled once into the
 * cache directory. `NEURON_LLAMA_LOG=1` leaves llama.cpp's own stderr logger instead.
 */

import { cacheDir } from "../../../src/bench/synthetic.ts";
import { LlamaRefError } from "./errors.ts";

const SOURCE = "void neuron_log_discard(int level, const char *text, void *user) {\n" +
  "  (void)level;\n  (void)text;\n  (void)user;\n}\n";

const LIBC = {
  dlopen: { parameters: ["buffer", "i32"], result: "pointer" },
  dlsym: { parameters: ["pointer", "buffer"], result: "pointer" },
} as const;
const RTLD_NOW = 2;

function cString(s: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(s);
  const out = new Uint8Array(new ArrayBuffer(bytes.length + 1));
  out.set(bytes);
  return out;
}

/** The shared object with the discarding logger, built on first use (any process may). */
async function library(): Promise<string> {
  const dir = `${cacheDir()}/llama_ref`;
  const path = `${dir}/quiet_log.so`;
  try {
    Deno.statSync(path);
    return path;
  } catch {
    // Not built yet.
  }
  Deno.mkdirSync(dir, { recursive: true });
  const work = Deno.makeTempDirSync({ dir, prefix: "tmp-" });
  try {
    Deno.writeTextFileSync(`${work}/quiet_log.c`, SOURCE);
    const out = await new Deno.Command("cc", {
      args: ["-shared", "-fPIC", "-O1", "-o", `${work}/quiet_log.so`, `${work}/quiet_log.c`],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new LlamaRefError(
        "llama_ref_unavailable",
        `cannot build the quiet llama.cpp logger: ${new TextDecoder().decode(out.stderr)}`,
      );
    }
    Deno.renameSync(`${work}/quiet_log.so`, path);
  } finally {
    Deno.removeSync(work, { recursive: true });
  }
  return path;
}

/** The logger's address for llama_log_set, or null to keep llama.cpp's stderr logger. */
export async function quietLogger(): Promise<Deno.PointerValue> {
  if (Deno.env.get("NEURON_LLAMA_LOG") === "1") return null;
  const libc = Deno.dlopen("libc.so.6", LIBC);
  const handle = libc.symbols.dlopen(cString(await library()), RTLD_NOW);
  const fn = handle === null ? null : libc.symbols.dlsym(handle, cString("neuron_log_discard"));
  if (fn === null) {
    throw new LlamaRefError("llama_ref_unavailable", "the quiet llama.cpp logger did not load");
  }
  return fn;
}

/** What a failure message says in place of llama.cpp's log. */
export const LOG_HINT = "(llama.cpp's log is off in tests: NEURON_LLAMA_LOG=1 shows it)";
