import type { Context, Hono } from "hono";
import type { DeviceProbe } from "../backend/probe/mod.ts";
import type { Config } from "../config/mod.ts";
import type { HarnessRegistry } from "../harness/mod.ts";
import type { Activation } from "./activation.ts";
import type { HttpMetrics } from "./metrics.ts";

/** Per-request values: the route pattern that matched, for metrics labels. */
export type ServerEnv = { Variables: { route: string } };
export type App = Hono<ServerEnv>;
export type Ctx = Context<ServerEnv>;

/** The node's state while it is going down. */
export interface Lifecycle {
  shuttingDown: boolean;
  /** Fires when the shutdown grace period is over: in-flight work must stop now. */
  readonly cancelAll: AbortSignal;
}

/** Everything route handlers read. */
export interface ServerDeps {
  config: Config;
  registry: HarnessRegistry;
  probe: DeviceProbe;
  activation: Activation;
  metrics: HttpMetrics;
  lifecycle: Lifecycle;
  /** ms since the epoch */
  startedAt: number;
  /** `http://localhost:<bound port>` */
  selfUrl: () => string;
}

/** The `:id` path segment, percent-decoded (`Qwen%2FQwen3-8B` -> `Qwen/Qwen3-8B`). */
export function idParam(c: Ctx): string {
  return c.req.param("id") ?? "";
}
