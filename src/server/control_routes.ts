import { versionInfo } from "../common/version.ts";
import type { ServerDeps } from "./context.ts";
import { hostFacts } from "./host.ts";
import { renderMetrics } from "./metrics_routes.ts";
import type { Routes } from "./routes.ts";

/** `/version`, `/discovery`, `/health`, `/metrics`. */
export function controlRoutes(routes: Routes, deps: ServerDeps): void {
  routes.on("GET", "/version", (c) => c.json(versionInfo()));

  routes.on("GET", "/discovery", (c) => {
    const d = deps.probe.discovery();
    return c.json({
      ...hostFacts(),
      cuda_version: d.cuda_version,
      driver_version: d.driver_version,
      devices: d.devices,
      harnesses: deps.registry.names(),
      ...(d.cuda_unavailable_reason ? { cuda_unavailable_reason: d.cuda_unavailable_reason } : {}),
      max_prompt_tokens: deps.config.max_prompt_tokens,
    });
  });

  routes.on("GET", "/health", (c) => {
    const harnesses = deps.registry.health();
    return c.json({
      uptime_secs: Math.floor((Date.now() - deps.startedAt) / 1000),
      ...hostFacts(),
      status: deps.lifecycle.shuttingDown ? "shutting_down" : "ok",
      devices: deps.probe.health(),
      activation: deps.activation.report(),
      models: harnesses.flatMap((h) =>
        h.models.map((m) => ({
          id: m.id,
          in_flight: m.in_flight,
          queue_depth: m.queue_depth,
          tok_s_prefill: m.tok_s_prefill,
          tok_s_decode: m.tok_s_decode,
          ...(m.scheduler ? { scheduler: m.scheduler } : {}),
        }))
      ),
      harnesses: harnesses.map((h) => ({
        name: h.name,
        kind: h.kind,
        state: h.state,
        ...(h.detail ? { detail: h.detail } : {}),
      })),
    });
  });

  routes.on("GET", "/metrics", (c) => c.body(...renderMetrics(deps)));
}
