/**
 * The HTTP server alone in a process of its own, for tests that need its file-descriptor
 * limit small (run it under `ulimit -n`). Args: max connections. Logs JSON lines on
 * stderr, `listening` with the port first; SIGTERM drains and exits 0.
 */
import { log } from "../../src/common/log.ts";
import { HttpServer } from "../../src/http/mod.ts";

const server = new HttpServer({
  hostname: "127.0.0.1",
  port: 0,
  headerTimeoutMs: 60_000,
  idleTimeoutMs: 60_000,
  maxConnections: Number(Deno.args[0]),
  handler: () => new Response("ok"),
  onError: () => new Response("failed", { status: 500 }),
});
log.info("listening", { port: server.addr.port });
Deno.addSignalListener("SIGTERM", async () => {
  server.closeAll();
  await server.drain();
  Deno.exit(0);
});
