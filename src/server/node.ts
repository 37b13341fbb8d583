import { DeviceProbe } from "../backend/probe/mod.ts";
import type { Config } from "../config/mod.ts";
import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { connectionCap, HttpServer, openFileLimit } from "../http/mod.ts";
import { HarnessRegistry } from "../harness/mod.ts";
import { Activation } from "./activation.ts";
import { createApp } from "./app.ts";
import type { Lifecycle } from "./context.ts";
import { controlErrorResponse } from "./errors.ts";
import { HttpMetrics } from "./metrics.ts";

/** How long cancelled requests get to end their responses at shutdown before the cut. */
const CANCELLED_STREAMS_END_MS = 2000;

/** A running node. */
export interface NeuronNode {
  /** The bound port (differs from the config when it asked for 0). */
  readonly port: number;
  /** `http://<host>:<port>` to reach it from this machine. */
  readonly url: string;
  /** Resolves when default models have all been tried. */
  readonly activated: Promise<void>;
  /**
   * Stops accepting, lets in-flight requests finish within `shutdown_grace_secs` (then
   * cancels them), unloads every model. Safe to call more than once.
   */
  shutdown(): Promise<void>;
}

/**
 * `[http] max_connections`, never above what the open-file limit leaves room for: past it
 * accepting would fail with EMFILE and starve model loading of descriptors as well.
 */
function maxConnections(config: Config): number {
  const limit = openFileLimit();
  const cap = connectionCap(limit);
  const asked = config.http.max_connections;
  if (asked === undefined) return cap;
  if (asked > cap) {
    log.warn("max_connections above what the open-file limit allows", {
      max_connections: asked,
      open_file_limit: limit,
      using: cap,
    });
    return cap;
  }
  return asked;
}

/** Addresses only this machine can reach. */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127\.\d+\.\d+\.\d+$/.test(bare);
}

/** Binds the listener, then starts harnesses and default-model loading in the background. */
export function startNode(config: Config): NeuronNode {
  const startedAt = Date.now();
  const probe = DeviceProbe.open(config.cuda);
  const discovery = probe.discovery();
  if (discovery.cuda_unavailable_reason) {
    log.warn("CUDA unavailable", { reason: discovery.cuda_unavailable_reason });
  }
  let port = config.port;
  const selfUrl = () => `http://localhost:${port}`;
  const registry = HarnessRegistry.fromConfig(config, { selfUrl });
  const activation = new Activation(config.default_models);
  const cancelAll = new AbortController();
  const lifecycle: Lifecycle = { shuttingDown: false, cancelAll: cancelAll.signal };
  const metrics = new HttpMetrics();
  const app = createApp({
    config,
    registry,
    probe,
    activation,
    metrics,
    lifecycle,
    startedAt,
    selfUrl,
  });

  const connections = maxConnections(config);
  const server = new HttpServer({
    hostname: config.host,
    port: config.port,
    headerTimeoutMs: config.http.header_timeout_secs * 1000,
    idleTimeoutMs: config.http.idle_timeout_secs * 1000,
    maxConnections: connections,
    handler: (req) => app.fetch(req),
    onError: (err) => {
      log.error("request failed", { error: errorMessage(err) });
      return controlErrorResponse(err);
    },
  });
  port = server.addr.port;
  metrics.countConnections(() => ({ open: server.connections, max: connections }));
  const connectHost = ["0.0.0.0", "::", "[::]"].includes(config.host) ? "127.0.0.1" : config.host;
  const url = `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${port}`;
  log.info("listening", {
    host: config.host,
    port,
    devices: discovery.devices.length,
    harnesses: registry.names(),
    max_connections: connections,
  });

  if (config.api_key === undefined && !isLoopback(config.host)) {
    log.warn("listening beyond loopback without api_key", {
      host: config.host,
      port,
      hint: "anyone who can reach this port may load models and run inference; set api_key",
    });
  }

  registry.start();
  const stopActivation = new AbortController();
  const activated = activation.run(registry, stopActivation.signal);

  let stopping: Promise<void> | null = null;
  const shutdown = (): Promise<void> => {
    stopping ??= (async () => {
      lifecycle.shuttingDown = true;
      stopActivation.abort();
      log.info("shutting down", { grace_secs: config.shutdown_grace_secs });
      const drained = server.drain();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<"deadline">((resolve) => {
        timer = setTimeout(() => resolve("deadline"), config.shutdown_grace_secs * 1000);
      });
      if (await Promise.race([drained.then(() => "drained" as const), deadline]) === "deadline") {
        log.warn("grace period over: cancelling in-flight requests");
        cancelAll.abort(new Error("the node is shutting down"));
        // Cancelled streams still write their finish, usage and [DONE] (the gateway meters
        // from them): a moment for that, then whatever is left is cut.
        const ended = await Promise.race([
          drained.then(() => true),
          new Promise<false>((resolve) => {
            timer = setTimeout(() => resolve(false), CANCELLED_STREAMS_END_MS);
          }),
        ]);
        if (!ended) server.closeAll();
        await drained;
      }
      clearTimeout(timer);
      await registry.close();
      log.info("stopped");
    })();
    return stopping;
  };

  return { port, url, activated, shutdown };
}
