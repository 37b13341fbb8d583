import { z } from "zod";
import { HarnessError, type InferenceRoute, type ModelInfo } from "../harness/mod.ts";
import { parseJsonBody, readBody, requireJsonContentType, validateBody } from "./body.ts";
import { type Ctx, idParam, type ServerDeps } from "./context.ts";
import { ServerError } from "./errors.ts";
import type { Routes } from "./routes.ts";

/** Only what routing needs; the harness validates the rest of the request. */
const routingSchema = z.looseObject({ model: z.string().min(1) });

const ROUTES: InferenceRoute[] = [
  "chat/completions",
  "completions",
  "responses",
  "embeddings",
  "rerank",
];

/** What a request for a model still loading is told to wait. */
const MODEL_LOADING_RETRY_SECS = 5;

/**
 * `/v1/models` from the registry (each model with its kind, `capabilities`, where its
 * harness says it); `/v1/{chat/completions,completions,responses,embeddings,rerank}` handed
 * over.
 */
export function openaiRoutes(routes: Routes, deps: ServerDeps): void {
  const { registry, config } = deps;
  const created = Math.floor(deps.startedAt / 1000);
  const modelObject = (id: string, m: ModelInfo) => ({
    id,
    object: "model",
    created,
    owned_by: m.harness,
    ...(m.capabilities?.length ? { capabilities: m.capabilities } : {}),
  });

  routes.on("GET", "/v1/models", (c) =>
    c.json({
      object: "list",
      // A served name is what clients are meant to use, as vLLM and llama-server list it.
      data: registry.list().filter((m) => m.status === "loaded").map((m) =>
        modelObject(m.served_name ?? m.id, m)
      ),
    }));

  routes.on("GET", "/v1/models/:id{.+}", (c) => {
    const id = idParam(c);
    const m = registry.loaded(id);
    if (!m) throw new HarnessError("model_not_found", `The model '${id}' does not exist`);
    return c.json(modelObject(id, m));
  });

  for (const route of ROUTES) {
    routes.on(
      "POST",
      `/v1/${route}`,
      (c) => dispatch(c, route, deps, config.api_key !== undefined),
    );
  }
}

async function dispatch(
  c: Ctx,
  route: InferenceRoute,
  deps: ServerDeps,
  stripAuth: boolean,
): Promise<Response> {
  if (deps.lifecycle.shuttingDown) {
    throw new ServerError("shutting_down", "the node is shutting down");
  }
  const req = c.req.raw;
  requireJsonContentType(req);
  const body = await readBody(req, deps.config.max_request_bytes);
  const json = parseJsonBody(body);
  const { model } = validateBody(routingSchema, json);
  const harness = deps.registry.find(model);
  if (!harness) {
    if (deps.registry.loading(model) || deps.activation.waitingFor(model)) {
      throw new HarnessError("model_loading", `The model '${model}' is still loading`, {
        retryAfter: MODEL_LOADING_RETRY_SECS,
      });
    }
    throw new HarnessError("model_not_found", `The model '${model}' does not exist`);
  }
  const headers = new Headers(req.headers);
  // The bearer token was neuron's own credential; it is not the upstream's to see.
  if (stripAuth) headers.delete("authorization");
  return await harness.serve({
    route,
    model,
    body,
    json: json as Record<string, unknown>,
    headers,
    signal: AbortSignal.any([req.signal, deps.lifecycle.cancelAll]),
  });
}
