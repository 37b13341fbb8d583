import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { ServerEnv } from "./context.ts";
import { ServerError } from "./errors.ts";

/** Routes reachable without the key: liveness must work for anything that watches the node. */
const OPEN_PATHS = new Set(["/health"]);

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/**
 * `Authorization: Bearer <api_key>` on every route but /health. Both sides are hashed first
 * so the comparison is constant-time whatever the lengths.
 */
export function bearerAuth(apiKey: string): MiddlewareHandler<ServerEnv> {
  const expected = digest(apiKey);
  return async (c, next) => {
    if (OPEN_PATHS.has(c.req.path)) return await next();
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (!match || !timingSafeEqual(digest(match[1]), expected)) {
      throw new ServerError(
        "unauthorized",
        match ? "invalid API key" : "missing API key (Authorization: Bearer <key>)",
        { headers: { "www-authenticate": 'Bearer realm="neuron"' } },
      );
    }
    await next();
  };
}
