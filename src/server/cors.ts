import type { MiddlewareHandler } from "hono";
import type { ServerEnv } from "./context.ts";

/**
 * CORS for browser clients (`[http] cors_origins`). Preflights from an allowed origin are
 * answered here, before authentication: browsers send them without the Authorization
 * header. Every answer to an allowed origin carries `Access-Control-Allow-Origin`, errors
 * included, so a page can read why it was refused. An origin that is not listed gets no
 * CORS header at all, and the browser keeps the answer from it. Credentials (cookies) are
 * never allowed: neuron authenticates with a bearer token, which needs no credentials mode.
 */

const METHODS = "GET, HEAD, POST, OPTIONS";
const DEFAULT_HEADERS = "authorization, content-type";
/** A comma-separated list of header names, as `Access-Control-Request-Headers` carries. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
const PREFLIGHT_MAX_AGE_SECS = "600";

export function cors(origins: readonly string[]): MiddlewareHandler<ServerEnv> {
  const anyOrigin = origins.includes("*");
  const listed = new Set(origins.map((o) => o.toLowerCase()));
  return async (c, next) => {
    const origin = c.req.header("origin");
    if (origin === undefined || !(anyOrigin || listed.has(origin.toLowerCase()))) {
      return await next();
    }
    const allow: Record<string, string> = anyOrigin
      ? { "access-control-allow-origin": "*" }
      : { "access-control-allow-origin": origin, vary: "Origin" };

    const requested = c.req.header("access-control-request-method");
    if (c.req.method === "OPTIONS" && requested !== undefined) {
      const asked = (c.req.header("access-control-request-headers") ?? "").trim();
      return new Response(null, {
        status: 204,
        headers: {
          ...allow,
          "access-control-allow-methods": METHODS,
          "access-control-allow-headers": HEADER_LIST.test(asked) ? asked : DEFAULT_HEADERS,
          "access-control-max-age": PREFLIGHT_MAX_AGE_SECS,
          vary: anyOrigin
            ? "Access-Control-Request-Headers"
            : "Origin, Access-Control-Request-Headers",
        },
      });
    }

    await next();
    // Relayed upstream answers carry immutable headers: answer with a copy.
    const headers = new Headers(c.res.headers);
    headers.set("access-control-allow-origin", allow["access-control-allow-origin"]);
    headers.set("access-control-expose-headers", "retry-after, www-authenticate");
    if (!anyOrigin) headers.append("vary", "Origin");
    c.res = new Response(c.res.body, {
      status: c.res.status,
      statusText: c.res.statusText,
      headers,
    });
  };
}
