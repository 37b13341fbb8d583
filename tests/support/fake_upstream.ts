/**
 * A small OpenAI-compatible server for tests, run as its own process (as mistral.rs or
 * llama-server would be): /health, /v1/models with mistral.rs-style status, reload/unload,
 * chat completions plain and streamed (SSE). Streams are paced so tests can cut them off;
 * every notable event is appended as a line to the `--events` file, so a test can see what
 * the upstream saw (e.g. `disconnect chatcmpl-3`).
 *
 * usage: deno run -A fake_upstream.ts --port N --events FILE --models a,b [--unloaded c]
 * Prints `listening <port>` on stdout once it accepts connections.
 */
import { parseArgs } from "node:util";

const status = new Map<string, "loaded" | "unloaded">();
const encoder = new TextEncoder();
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

/** The SSE frames of a streamed answer of `n` pieces. */
export function streamFrames(id: string, model: string, n: number): string[] {
  const frames = [chunk(id, model, { role: "assistant" }, null)];
  for (let i = 0; i < n; i++) frames.push(chunk(id, model, { content: `tök${i} ` }, null));
  frames.push(chunk(id, model, {}, "stop"));
  frames.push(
    `data: {"id":"${id}","object":"chat.completion.chunk","created":1700000000,"model":"${model}","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":${n},"total_tokens":${
      7 + n
    }}}\n\n`,
  );
  frames.push("data: [DONE]\n\n");
  return frames;
}

async function chat(req: Request): Promise<Response> {
  const bytes = new Uint8Array(await req.arrayBuffer());
  const body = JSON.parse(new TextDecoder().decode(bytes));
  const model = String(body.model);
  if (status.get(model) !== "loaded") {
    return json(
      { error: { message: `model ${model} not found`, type: "invalid_request_error" } },
      404,
    );
  }
  // A caller-chosen id makes two answers byte-comparable (direct vs through neuron).
  const id = req.headers.get("x-request-id") ?? `chatcmpl-${++counter}`;
  const seen = {
    "x-fake-request-sha256": await sha256(bytes),
    "x-fake-saw-authorization": req.headers.get("authorization") ?? "",
    "x-fake-saw-header": req.headers.get("x-test-header") ?? "",
  };
  event(`request ${id} ${body.stream ? "stream" : "plain"}`);
  if (!body.stream) {
    return new Response(completionBody(id, model), {
      headers: { "content-type": "application/json", ...seen },
    });
  }
  const frames = streamFrames(id, model, Number(body.max_tokens ?? 5));
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

async function modelOp(req: Request, op: "reload" | "unload"): Promise<Response> {
  const { model_id } = await req.json();
  event(`${op} ${model_id}`);
  if (!status.has(model_id)) {
    return json({ model_id, status: "error", error: `model ${model_id} is not configured` }, 404);
  }
  status.set(model_id, op === "reload" ? "loaded" : "unloaded");
  return json({ model_id, status: status.get(model_id) });
}

function handle(req: Request): Response | Promise<Response> {
  const path = new URL(req.url).pathname;
  if (path === "/health") return new Response("ok");
  if (path === "/v1/models" && req.method === "GET") {
    return json({
      object: "list",
      data: [...status].map(([id, s]) => ({
        id,
        object: "model",
        created: 1700000000,
        owned_by: "fake",
        status: s,
        max_model_len: 4096,
      })),
    });
  }
  if (path === "/v1/models/reload" && req.method === "POST") return modelOp(req, "reload");
  if (path === "/v1/models/unload" && req.method === "POST") return modelOp(req, "unload");
  if (path === "/v1/chat/completions" && req.method === "POST") return chat(req);
  return json({ error: { message: `no route ${path}` } }, 404);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      port: { type: "string", default: "0" },
      events: { type: "string" },
      models: { type: "string", default: "" },
      unloaded: { type: "string", default: "" },
    },
  });
  for (const id of values.models.split(",").filter(Boolean)) status.set(id, "loaded");
  for (const id of values.unloaded.split(",").filter(Boolean)) status.set(id, "unloaded");
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
