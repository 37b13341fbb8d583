/**
 * Child processes for tests: the fake upstream and neuron itself, each started on a
 * loopback port and always stopped, with stderr kept for failure messages.
 */
import { freePort } from "./free_port.ts";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const DENO = Deno.execPath();
export const FAKE_UPSTREAM = new URL("./fake_upstream.ts", import.meta.url).pathname;
export const FAKE_SYSTEMCTL = new URL("./fake_systemctl.sh", import.meta.url).pathname;

/** Reads lines from a byte stream, handing each to `onLine`, until it ends. */
async function readLines(stream: ReadableStream<Uint8Array>, onLine: (l: string) => void) {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      onLine(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  }
  if (buf) onLine(buf);
}

export interface Upstream {
  port: number;
  url: string;
  eventsFile: string;
  events(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Reads the event lines a fake upstream wrote (it may have been started by a stand-in). */
export async function readEvents(file: string): Promise<string[]> {
  try {
    return (await Deno.readTextFile(file)).split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

export interface UpstreamOptions {
  models?: string[];
  unloaded?: string[];
  /** Models whose loads fail (llama_router). */
  failing?: string[];
  port?: number;
  /** Whose model management the fake mimics (see fake_upstream.ts). */
  api?: "mistralrs" | "llama_router" | "none";
  /** How long a llama_router load or unload takes to finish after its answer. */
  settleMs?: number;
}

export async function startUpstream(opts: UpstreamOptions = {}): Promise<Upstream> {
  const eventsFile = await Deno.makeTempFile({ suffix: ".events" });
  const child = new Deno.Command(DENO, {
    args: [
      "run",
      "-A",
      FAKE_UPSTREAM,
      "--port",
      String(opts.port ?? 0),
      "--events",
      eventsFile,
      "--models",
      (opts.models ?? []).join(","),
      "--unloaded",
      (opts.unloaded ?? []).join(","),
      "--failing",
      (opts.failing ?? []).join(","),
      "--api",
      opts.api ?? "mistralrs",
      "--settle-ms",
      String(opts.settleMs ?? 200),
    ],
    stdout: "piped",
    stderr: "inherit",
    stdin: "null",
  }).spawn();
  const port = await new Promise<number>((resolve, reject) => {
    readLines(child.stdout, (line) => {
      const m = /^listening (\d+)$/.exec(line);
      if (m) resolve(Number(m[1]));
    }).then(() => reject(new Error("fake upstream exited before listening")));
  });
  let stopped = false;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    eventsFile,
    events: () => readEvents(eventsFile),
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
      await child.status;
      await Deno.remove(eventsFile).catch(() => {});
    },
  };
}

export interface NeuronProcess {
  port: number;
  url: string;
  /** Every stderr line so far (JSON log lines and messages). */
  stderr: string[];
  child: Deno.ChildProcess;
  /** Resolves with the exit code. */
  exited: Promise<number>;
  kill(signal?: Deno.Signal): void;
}

/**
 * Runs `neuron` (main.ts) with `args`; resolves once it logged `listening`. `fdLimit` runs
 * it under `ulimit -n` (through bash, which then execs deno).
 */
export async function startNeuron(
  args: string[],
  env: Record<string, string> = {},
  opts: { fdLimit?: number } = {},
): Promise<NeuronProcess> {
  const deno = ["run", "-A", "--unstable-no-legacy-abort", `${ROOT}main.ts`, ...args];
  const command = opts.fdLimit === undefined ? { cmd: DENO, args: deno } : {
    cmd: "bash",
    args: ["-c", `ulimit -n ${opts.fdLimit} && exec "$@"`, "bash", DENO, ...deno],
  };
  const child = new Deno.Command(command.cmd, {
    args: command.args,
    env: { NO_COLOR: "1", ...env },
    stdout: "null",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const stderr: string[] = [];
  let resolvePort: (p: number) => void;
  const portPromise = new Promise<number>((r) => (resolvePort = r));
  const drained = readLines(child.stderr, (line) => {
    stderr.push(line);
    try {
      const rec = JSON.parse(line);
      if (rec.msg === "listening") resolvePort(rec.port);
    } catch {
      // not a log line
    }
  });
  const exited = child.status.then(async (s) => {
    await drained;
    return s.code;
  });
  const port = await Promise.race([
    portPromise,
    exited.then((code) => {
      throw new Error(`neuron exited with ${code} before listening:\n${stderr.join("\n")}`);
    }),
  ]);
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    stderr,
    child,
    exited,
    kill: (signal: Deno.Signal = "SIGTERM") => child.kill(signal),
  };
}

/** Runs `neuron` to completion (for commands that exit by themselves). */
export async function runNeuron(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(DENO, {
    args: ["run", "-A", "--unstable-no-legacy-abort", `${ROOT}main.ts`, ...args],
    env: { NO_COLOR: "1", ...env },
    stdin: "null",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

export { freePort };
