/**
 * The process loop of `neuron --worker`: one request per stdin line, one reply per stdout
 * line, logs on stderr. Stdout carries nothing but replies: anything printed with console
 * goes to stderr here. End of input or `shutdown` (after its `bye`) ends the loop with 0.
 */

import { log } from "../common/log.ts";
import { tpLibrary } from "./native.ts";
import { TpWorker, type WorkerIdentity } from "./worker.ts";

const encoder = new TextEncoder();

export interface WorkerIo {
  input: ReadableStream<Uint8Array>;
  write(bytes: Uint8Array): void;
}

function writeAll(file: { writeSync(p: Uint8Array): number }, bytes: Uint8Array): void {
  for (let off = 0; off < bytes.length;) off += file.writeSync(bytes.subarray(off));
}

const STDIO: WorkerIo = {
  get input() {
    return Deno.stdin.readable;
  },
  write: (bytes) => writeAll(Deno.stdout, bytes),
};

/** Keeps stray console output off the reply channel. */
function guardStdout(): void {
  const toStderr = (...args: unknown[]): void => console.error(...args);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
}

/** Serves the leader until end of input or `shutdown`; returns the exit code. */
export async function runWorker(identity: WorkerIdentity, io: WorkerIo = STDIO): Promise<number> {
  const wlog = log.child({ rank: identity.rank, world_size: identity.worldSize });
  if (io === STDIO) {
    guardStdout();
    // The leader's engine thread owns this process: if it ends, so does this.
    if (tpLibrary().sym.nk_die_with_parent() !== 0) {
      wlog.warn("the leader is already gone: exiting");
      return 1;
    }
  }
  wlog.debug("tensor-parallel worker started", { cuda_device: identity.cudaDevice });
  const worker = new TpWorker(identity);
  const decoder = new TextDecoder();
  let buffered = "";
  const serve = (line: string): boolean => {
    const { reply, exit } = worker.handle(line);
    // The leader reports failures with their context; here they are detail.
    if (reply.op === "error") {
      wlog.debug("request failed", { kind: reply.kind, error: reply.message });
    }
    io.write(encoder.encode(JSON.stringify(reply) + "\n"));
    return exit;
  };
  try {
    for await (const chunk of io.input) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (serve(line)) return 0;
      }
    }
    buffered += decoder.decode();
    if (buffered !== "" && serve(buffered)) return 0;
    wlog.debug("end of input: exiting");
    return 0;
  } finally {
    worker.close();
  }
}
