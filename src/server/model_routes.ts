import { z } from "zod";
import { modelSpecBodySchema } from "../config/mod.ts";
import { HarnessError, type ModelInfo } from "../harness/mod.ts";
import { readJson } from "./body.ts";
import { idParam, type ServerDeps } from "./context.ts";
import { ServerError } from "./errors.ts";
import type { Routes } from "./routes.ts";

const unloadSchema = z.object({ model_id: z.string().min(1) });

/** The WIRE.md /models entry: required fields always, optional ones only when known. */
function wireModel(m: ModelInfo): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: m.id,
    ...(m.served_name ? { served_name: m.served_name } : {}),
    harness: m.harness,
    status: m.status,
    devices: m.devices,
    vram_used_mb: m.vram_used_mb,
  };
  if (m.capabilities?.length) out.capabilities = m.capabilities;
  if (m.limit) out.limit = m.limit;
  if (m.tool_call !== undefined) out.tool_call = m.tool_call;
  if (m.reasoning !== undefined) out.reasoning = m.reasoning;
  if (m.servable) out.servable = m.servable;
  if (m.progress !== undefined) out.progress = m.progress;
  if (m.load_progress !== undefined) out.load_progress = m.load_progress;
  if (m.error !== undefined) out.error = m.error;
  if (m.quantization !== undefined) out.quantization = m.quantization;
  if (m.memory_bytes !== undefined) out.memory_bytes = m.memory_bytes;
  if (m.kv_cache !== undefined) out.kv_cache = m.kv_cache;
  return out;
}

/** `/models`, `/models/load`, `/models/unload`, `/models/{id}/endpoint|capabilities`. */
export function modelRoutes(routes: Routes, deps: ServerDeps): void {
  const { registry, config } = deps;

  const refuseWhileStopping = (): void => {
    if (deps.lifecycle.shuttingDown) {
      throw new ServerError("shutting_down", "the node is shutting down");
    }
  };

  routes.on("GET", "/models", (c) => c.json(registry.list().map(wireModel)));

  routes.on("POST", "/models/load", async (c) => {
    refuseWhileStopping();
    const { value: spec } = await readJson(c.req.raw, config.max_body_bytes, modelSpecBodySchema);
    await registry.load(spec);
    return c.json({ status: "loaded" });
  });

  routes.on("POST", "/models/unload", async (c) => {
    const { value } = await readJson(c.req.raw, config.max_body_bytes, unloadSchema);
    await registry.unload(value.model_id);
    return c.json({ status: "unloaded" });
  });

  // `{.+}` also accepts an id whose `/` arrived unencoded; the gateway sends `%2F`.
  routes.on("GET", "/models/:id{.+}/endpoint", (c) => {
    const id = idParam(c);
    const url = registry.endpoint(id);
    if (url === null) throw new HarnessError("model_not_found", `model ${id} is not loaded`);
    return c.json({ url });
  });

  routes.on("GET", "/models/:id{.+}/capabilities", (c) => {
    const id = idParam(c);
    const m = registry.list().find((m) => m.id === id && m.status !== "failed");
    if (!m) throw new HarnessError("model_not_found", `model ${id} is not known`);
    return c.json({ capabilities: m.capabilities?.length ? m.capabilities : ["text"] });
  });
}
