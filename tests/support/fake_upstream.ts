/**
 * A small OpenAI-compatible server for tests, run as its own process (as mistral.rs,
 * llama-server or vLLM would be): /health, /v1/models, model management, chat completions
 * plain and streamed (SSE). `--api` picks whose management it mimics:
 * - `mistralrs` (default): string statuses, `POST /v1/models/{reload,unload}` answered once
 *   done;
 * - `llama_router`: llama-server in router mode: `{"value": …}` statuses, `POST
 *   /models/{load,unload}` answered at once and finished `--settle-ms` later, llama's error
 *   bodies (tools/server/server-models.cpp);
 * - `none`: a server that serves what it started with (vLLM): no statuses, no management
 *   routes, vLLM's error bodies.
 * Like vLLM and current llama-server, a stream carries its usage chunk only when the request
 * sets `stream_options.include_usage`. Streams are paced so tests can cut them off; every
 * notable event is appended as a line to the `--events` file (e.g. `disconnect chatcmpl-3`,
 * `body chatcmpl-3 "<the request body as received>"`), so a test can see what the upstream saw.
 *
 * Request headers a test can set: `x-request-id` (the answer's id), `x-fake-delay-ms` (stream
 * pacing), `x-fake-status` (answer that status, with Retry-After and a text body, as a busy
 * server or a proxy in front of it would), `x-fake-gzip: 1` (compress the answer whatever the
 * request accepts).
 *
 * usage: deno run -A fake_upstream.ts --port N --events FILE --models a,b [--unloaded c]
 *          [--failing d] [--api mistralrs|llama_router|none] [--settle-ms 200]
 * Prints `listening <port>` on stdout once it accepts connections.
 */
import { parseArgs } from "node:util";

type Api = "mistralrs" | "llama_router" | "none";
type State = "loaded" | "unloaded" | "loading" | "failed";

export const MAX_MODEL_LEN = 4096;

const status = new Map<string, State>();
const failing = new Set<string>();
const encoder = new TextEncoder();
let api: Api = "mistralrs";
let settleMs = 200;
let counter = 0;
let eventsFile: string | undefined;

function event(line: string): void {
  if (eventsFile) Deno.writeTextFileSync(eventsFile, line + "\n", { append: true });
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** llama-server's error body (`res_err` in tools/server). */
function llamaError(status: number, message: string, type: string): Response {
  return json({ error: { code: status, message, type } }, status);
}

/**
 * The non-streaming answer's exact bytes: odd spacing and non-ASCII text, so a proxy that
 * re-serialised the JSON would be caught.
 */
export function completionBody(id: string, model: string, text = "Hello from upstream ✓"): string {
  return `{"id": "${id}",  "object":"chat.completion","created":1700000000,"model":${
    JSON.stringify(model)
  },"choices":[{"index":0,"message":{"role":"assistant","content":${
    JSON.stringify(text)
  }},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n`;
}

/** One SSE frame of a chat.completion.chunk. */
function chunk(id: string, model: string, delta: unknown, finish: string | null): string {
  return `data: ${
    JSON.stringify({
      id,
      object: "chat.completion.chunk",
      created: 1700000000,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    })
  }\n\n`;
}

/** The SSE frames of a streamed answer of `n` pieces; the usage chunk when asked for. */
export function streamFrames(id: string, model: string, n: number, usage = true): string[] {
  const frames = [chunk(id, model, { role: "assistant" }, null)];
  for (let i = 0; i < n; i++) frames.push(chunk(id, model, { content: `tök${i} ` }, null));
  frames.push(chunk(id, model, {}, "stop"));
  if (usage) {
    frames.push(
      `data: {"id":"${id}","object":"chat.completion.chunk","created":1700000000,"model":"${model}","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":${n},"total_tokens":${
        7 + n
      }}}\n\n`,
    );
  }
  frames.push("data: [DONE]\n\n");
  return frames;
}

/** What each kind of server answers for a model it does not serve right now. */
function notServed(model: string): Response {
  if (api === "llama_router") {
    return llamaError(400, "model is not loaded", "invalid_request_error");
  }
  if (api === "none") {
    return json({
      error: {
        message: `The model \`${model}\` does not exist.`,
        type: "NotFoundError",
        param: "model",
        code: 404,
      },
    }, 404);
  }
  return json(
    { error: { message: `model ${model} not found`, type: "invalid_request_error" } },
    404,
  );
}

/** What each kind of server answers for a request longer than the context, or null. */
function overContext(asked: number): Response | null {
  const tokens = 7 + asked;
  if (tokens <= MAX_MODEL_LEN) return null;
  if (api === "llama_router") {
    return json({
      error: {
        code: 400,
        message:
          `request (${tokens} tokens) exceeds the available context size (${MAX_MODEL_LEN} tokens), try increasing it`,
        type: "exceed_context_size_error",
        n_prompt_tokens: tokens,
        n_ctx: MAX_MODEL_LEN,
      },
    }, 400);
  }
  if (api === "none") {
    return json({
      object: "error",
      message:
        `This model's maximum context length is ${MAX_MODEL_LEN} tokens. However, you requested ${tokens} tokens (7 in the messages, ${asked} in the completion). Please reduce the length of the messages or completion.`,
      type: "BadRequestError",
      param: null,
      code: 400,
    }, 400);
  }
  return null;
}

async function chat(req: Request, bytes: Uint8Array<ArrayBuffer>): Promise<Response> {
  const id = req.headers.get("x-request-id") ?? `chatcmpl-${++counter}`;
  event(`body ${id} ${JSON.stringify(new TextDecoder().decode(bytes))}`);
  let body;
  try {
    body = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return json({ error: { message: "request body is not JSON", type: "BadRequestError" } }, 400);
  }
  const model = String(body.model);
  if (status.get(model) !== "loaded") return notServed(model);
  const maxTokens = Number(body.max_tokens ?? 5);
  const tooLong = overContext(maxTokens);
  if (tooLong) return tooLong;
  const seen = {
    "x-fake-request-sha256": await sha256(bytes),
    "x-fake-saw-authorization": req.headers.get("authorization") ?? "",
    "x-fake-saw-header": req.headers.get("x-test-header") ?? "",
    "x-fake-saw-content-encoding": req.headers.get("content-encoding") ?? "",
    "x-fake-saw-accept-encoding": req.headers.get("accept-encoding") ?? "",
  };
  event(`request ${id} ${body.stream ? "stream" : "plain"}`);
  if (!body.stream) {
    return new Response(completionBody(id, model), {
      headers: { "content-type": "application/json", ...seen },
    });
  }
  const frames = streamFrames(id, model, maxTokens, body.stream_options?.include_usage === true);
  const delay = Number(req.headers.get("x-fake-delay-ms") ?? "5");
  let i = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller): Promise<void> {
      return new Promise((resolve) => {
        timer = setTimeout(() => {
          if (i < frames.length) controller.enqueue(encoder.encode(frames[i++]));
          if (i === frames.length) {
            controller.close();
            event(`complete ${id}`);
          }
          resolve();
        }, delay);
      });
    },
    cancel(): void {
      clearTimeout(timer);
      event(`disconnect ${id} after ${i}`);
    },
  });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", ...seen },
  });
}

/** mistral.rs: the change is made before the answer. */
function mistralOp(op: "reload" | "unload", modelId: string): Response {
  event(`${op} ${modelId}`);
  if (!status.has(modelId)) {
    return json(
      { model_id: modelId, status: "error", error: `model ${modelId} is not configured` },
      404,
    );
  }
  status.set(modelId, op === "reload" ? "loaded" : "unloaded");
  return json({ model_id: modelId, status: status.get(modelId) });
}

/** llama-server's router: the answer comes at once, the change `settleMs` later. */
function llamaOp(op: "load" | "unload", name: string): Response {
  event(`${op} ${name}`);
  const state = status.get(name);
  const running = state === "loaded" || state === "loading";
  if (state === undefined) {
    return op === "load"
      ? llamaError(404, "model is not found", "not_found_error")
      : llamaError(400, "model is not found", "invalid_request_error");
  }
  if (op === "load" && running) {
    return llamaError(400, "model is already running", "invalid_request_error");
  }
  if (op === "unload" && !running) {
    return llamaError(400, "model is not running", "invalid_request_error");
  }
  if (op === "load") status.set(name, "loading");
  setTimeout(() => {
    const done = op === "unload" ? "unloaded" : failing.has(name) ? "failed" : "loaded";
    status.set(name, done);
    event(`${done} ${name}`);
  }, settleMs);
  return json({ success: true });
}

function listing(): Response {
  const data = [...status].filter(([, s]) => api !== "none" || s === "loaded").map(([id, s]) => {
    const base = { id, object: "model", created: 1700000000 };
    if (api === "none") {
      return { ...base, owned_by: "vllm", root: id, max_model_len: MAX_MODEL_LEN };
    }
    if (api === "mistralrs") {
      const shown = s === "loading" ? "reloading" : s;
      return { ...base, owned_by: "fake", status: shown, max_model_len: MAX_MODEL_LEN };
    }
    const value = s === "failed" ? "unloaded" : s;
    const llamaStatus = s === "failed"
      ? { value, args: ["llama-server"], failed: true, exit_code: 1 }
      : { value, args: ["llama-server"] };
    return { ...base, owned_by: "llamacpp", status: llamaStatus };
  });
  return json({ object: "list", data });
}

function notFound(path: string): Response {
  if (api === "llama_router") return llamaError(404, "File Not Found", "not_found_error");
  if (api === "none") return json({ detail: "Not Found" }, 404);
  return json({ error: { message: `no route ${path}` } }, 404);
}

async function route(req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  const post = req.method === "POST";
  const forced = req.headers.get("x-fake-status");
  if (forced) {
    return new Response("upstream busy, try later\n", {
      status: Number(forced),
      headers: { "content-type": "text/plain", "retry-after": "7" },
    });
  }
  if (path === "/health") return new Response("ok");
  if (path === "/v1/models" && req.method === "GET") return listing();
  if (api === "llama_router" && path === "/models" && req.method === "GET") return listing();
  if (path === "/v1/chat/completions" && post) {
    return chat(req, new Uint8Array(await req.arrayBuffer()));
  }
  if (api === "mistralrs" && post && path.startsWith("/v1/models/")) {
    const op = path.slice("/v1/models/".length);
    if (op === "reload" || op === "unload") return mistralOp(op, (await req.json()).model_id);
  }
  if (api === "llama_router" && post && (path === "/models/load" || path === "/models/unload")) {
    return llamaOp(path === "/models/load" ? "load" : "unload", (await req.json()).model ?? "");
  }
  return notFound(path);
}

/** Compresses the answer when the request says so, whatever it accepts. */
async function handle(req: Request): Promise<Response> {
  const res = await route(req);
  if (req.headers.get("x-fake-gzip") !== "1" || !res.body) return res;
  const headers = new Headers(res.headers);
  headers.set("content-encoding", "gzip");
  headers.delete("content-length");
  return new Response(res.body.pipeThrough(new CompressionStream("gzip")), {
    status: res.status,
    headers,
  });
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      port: { type: "string", default: "0" },
      events: { type: "string" },
      models: { type: "string", default: "" },
      unloaded: { type: "string", default: "" },
      failing: { type: "string", default: "" },
      api: { type: "string", default: "mistralrs" },
      "settle-ms": { type: "string", default: "200" },
    },
  });
  const list = (s: string) => s.split(",").filter(Boolean);
  for (const id of list(values.models)) status.set(id, "loaded");
  for (const id of list(values.unloaded)) status.set(id, "unloaded");
  for (const id of list(values.failing)) {
    status.set(id, "unloaded");
    failing.add(id);
  }
  api = values.api as Api;
  settleMs = Number(values["settle-ms"]);
  eventsFile = values.events;
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: Number(values.port),
    onListen: ({ port }) => console.log(`listening ${port}`),
  }, handle);
  Deno.addSignalListener("SIGTERM", () => {
    event("sigterm");
    server.shutdown().then(() => Deno.exit(0));
    setTimeout(() => Deno.exit(0), 500);
  });
}
