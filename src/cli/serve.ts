import { errorMessage } from "../common/errors.ts";
import { isLogLevel, log, setLogLevel } from "../common/log.ts";
import { loadConfig } from "../config/mod.ts";
import { startNode } from "../server/mod.ts";
import { type Command, EXIT_OK, EXIT_RUNTIME, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron [serve] [--config FILE] [-p PORT] [--host ADDR] [--log-level LEVEL]

Runs the node: the control plane the gateway drives, the OpenAI-compatible API and /metrics.

  -c, --config FILE      neuron.toml to read (default: built-in defaults only)
  -p, --port PORT        overrides \`port\` (0 picks a free port)
      --host ADDR        overrides \`host\`
      --log-level LEVEL  error | warn | info | debug | trace (overrides \`log_level\`)
  -h, --help             this text

Environment: NEURON_<KEY> overrides any config key (NEURON_PORT=9000,
NEURON_HARNESS__NATIVE__HF_CACHE=/x). SIGTERM/SIGINT shut down gracefully.`;

interface ServeArgs {
  config: string | null;
  port?: number;
  host?: string;
  logLevel?: string;
  help: boolean;
}

function parse(args: string[]): ServeArgs {
  const { values } = parseFlags({
    args,
    strict: true,
    allowPositionals: false,
    options: {
      config: { type: "string", short: "c" },
      port: { type: "string", short: "p" },
      host: { type: "string" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  let port: number | undefined;
  if (values.port !== undefined) {
    port = /^\d+$/.test(values.port) ? Number(values.port) : NaN;
    if (!(port >= 0 && port <= 65535)) {
      throw new UsageError(`--port: expected 0..65535, got ${JSON.stringify(values.port)}`);
    }
  }
  const logLevel = values["log-level"];
  if (logLevel !== undefined && !isLogLevel(logLevel)) {
    throw new UsageError(`--log-level: expected error|warn|info|debug|trace, got ${logLevel}`);
  }
  return { config: values.config ?? null, port, host: values.host, logLevel, help: !!values.help };
}

/**
 * Signals this close to the first are the same request to stop: Ctrl-C under `deno task`
 * reaches the node twice, once from the terminal (the whole process group gets it) and
 * once forwarded by `deno task`.
 */
const ECHO_MS = 500;

/**
 * Resolves with the first SIGTERM/SIGINT; another one, later than its echo, ends the
 * process at once.
 */
function firstSignal(): Promise<Deno.Signal> {
  return new Promise((resolve) => {
    let firstAt: number | null = null;
    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      Deno.addSignalListener(sig, () => {
        const now = performance.now();
        if (firstAt === null) {
          firstAt = now;
          resolve(sig);
        } else if (now - firstAt < ECHO_MS) {
          log.debug("repeated signal taken as the first one's echo", { signal: sig });
        } else {
          log.warn("second signal: exiting without waiting", { signal: sig });
          Deno.exit(EXIT_RUNTIME);
        }
      });
    }
  });
}

export const serveCommand: Command = {
  summary: "run the node (default)",
  async run(args: string[]): Promise<number> {
    const opts = parse(args);
    if (opts.help) {
      console.log(HELP);
      return EXIT_OK;
    }
    const { config, file, ignoredEnv } = await loadConfig(opts.config);
    if (opts.port !== undefined) config.port = opts.port;
    if (opts.host !== undefined) config.host = opts.host;
    const level = opts.logLevel ?? config.log_level;
    if (isLogLevel(level)) setLogLevel(level);
    log.debug("configuration", { file, ignored_env: ignoredEnv });
    if (file === null) log.info("no --config given: running on defaults");

    const stop = firstSignal();
    let node;
    try {
      node = startNode(config);
    } catch (err) {
      log.error("cannot start", { error: errorMessage(err) });
      console.error(`neuron: cannot listen on ${config.host}:${config.port}: ${errorMessage(err)}`);
      return EXIT_RUNTIME;
    }
    const signal = await stop;
    log.info("signal received", { signal });
    await node.shutdown();
    return EXIT_OK;
  },
};
