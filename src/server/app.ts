import { Hono } from "hono";
import { log } from "../common/log.ts";
import { passThrough } from "../harness/mod.ts";
import { bearerAuth } from "./auth.ts";
import { cors } from "./cors.ts";
import type { App, ServerDeps, ServerEnv } from "./context.ts";
import { controlRoutes } from "./control_routes.ts";
import { controlErrorResponse, isOpenAiPath, openaiErrorResponse, ServerError } from "./errors.ts";
import { modelRoutes } from "./model_routes.ts";
import { openaiRoutes } from "./openai_routes.ts";
import { Routes } from "./routes.ts";

/** The whole HTTP surface of a node (WIRE.md), as a Hono app. */
export function createApp(deps: ServerDeps): App {
  const app = new Hono<ServerEnv>();
  const reqLog = log.child({ component: "http" });

  // One rule for every error, 401 included: the gateway decodes control-plane bodies flat.
  app.onError((err, c) =>
    isOpenAiPath(c.req.path) ? openaiErrorResponse(err) : controlErrorResponse(err)
  );
  app.notFound((c) => {
    const err = new ServerError("not_found", `no route for ${c.req.method} ${c.req.path}`);
    return isOpenAiPath(c.req.path) ? openaiErrorResponse(err) : controlErrorResponse(err);
  });

  // Metrics and request log. A response counts as in flight until its body is sent, so
  // a relayed stream stays counted for as long as it runs.
  app.use("*", async (c, next) => {
    const t0 = performance.now();
    deps.metrics.begin();
    let ended = false;
    const end = (): void => {
      if (!ended) {
        ended = true;
        deps.metrics.end();
      }
    };
    try {
      await next();
    } finally {
      const seconds = (performance.now() - t0) / 1000;
      const route = c.get("route") ?? "unmatched";
      const status = c.res.status;
      deps.metrics.observe(route, c.req.method, status, seconds);
      reqLog.debug("request", {
        method: c.req.method,
        path: c.req.path,
        status,
        ms: seconds * 1000,
      });
      const body = passThrough(c.res.body, end);
      c.res = new Response(body, c.res);
    }
  });

  if (deps.config.http.cors_origins.length > 0) app.use("*", cors(deps.config.http.cors_origins));
  if (deps.config.api_key !== undefined) app.use("*", bearerAuth(deps.config.api_key));

  const routes = new Routes(app);
  controlRoutes(routes, deps);
  modelRoutes(routes, deps);
  openaiRoutes(routes, deps);
  routes.finish();
  return app;
}
