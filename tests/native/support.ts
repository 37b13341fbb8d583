/**
 * What the native-engine suites share: the device they run on (one place:
 * `NEURON_TEST_DEVICE`, default `cpu`; `reference` is the slow pure-TypeScript backend),
 * a node config that may load the fixtures by path, and small SSE helpers.
 */
import { fixture, FIXTURES } from "../fixtures.ts";
import type { TestNode } from "../support/node.ts";
import { assertEquals } from "../support/assert.ts";

export const TEST_DEVICE: string = Deno.env.get("NEURON_TEST_DEVICE") ?? "cpu";

export interface NativeOptions {
  maxInFlight?: number;
  maxQueueDepth?: number;
  maxWaitSecs?: number;
  contextLength?: number;
  extra?: Record<string, unknown>;
}

/** A node config whose native harness runs on the test device and may open the fixtures. */
export function nativeNode(opts: NativeOptions = {}): Record<string, unknown> {
  return {
    harness: {
      native: {
        device: TEST_DEVICE,
        model_dirs: [FIXTURES],
        context_length: opts.contextLength ?? 1024,
        admission: {
          max_in_flight: opts.maxInFlight ?? 4,
          max_queue_depth: opts.maxQueueDepth ?? 64,
          max_wait_secs: opts.maxWaitSecs ?? 60,
        },
        ...opts.extra,
      },
    },
  };
}

/** Loads a fixture model by path; returns its model id. */
export async function loadFixture(node: TestNode, file: string): Promise<string> {
  const id = fixture(file);
  const res = await node.post("/models/load", { model_id: id, harness: "native" });
  assertEquals(res.status, 200, `load ${file}: ${await res.clone().text()}`);
  await res.body?.cancel();
  return id;
}

export interface SseFrame {
  /** The `event:` name, when there was one. */
  event?: string;
  /** The `data:` payload; `[DONE]` stays a string. */
  data: unknown;
}

/** Splits an SSE body into frames; comments (keep-alives) are counted, not returned. */
export function parseSse(text: string): { frames: SseFrame[]; comments: number } {
  const frames: SseFrame[] = [];
  let comments = 0;
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    let event: string | undefined;
    let data: string | undefined;
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) comments++;
      else if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data = line.slice(6);
      else throw new Error(`bad SSE line: ${JSON.stringify(line)}`);
    }
    if (data === undefined) continue;
    frames.push({ ...(event ? { event } : {}), data: data === "[DONE]" ? data : JSON.parse(data) });
  }
  return { frames, comments };
}

/** How a chat or completions stream ended: its error frame, finish reason and usage. */
export interface StreamEnd {
  fault?: { code: string; message: string };
  finishReason: unknown;
  usage: Record<string, number>;
}

/**
 * The end every stream has, cut short or not: [an error frame,] the finish chunk, the
 * usage chunk (`choices: []`), `[DONE]`. Throws when the frames are not in that order.
 */
export function streamEnd(frames: SseFrame[]): StreamEnd {
  const data = frames.map((f) => f.data as Record<string, unknown> | string);
  assertEquals(data.at(-1), "[DONE]", "the stream ends with [DONE]");
  const usage = data.at(-2) as { choices: unknown[]; usage: Record<string, number> };
  assertEquals(usage.choices, [], "the usage chunk has no choices");
  const finish = data.at(-3) as { choices: Array<{ finish_reason: unknown }> };
  const error = data.at(-4) as { error?: { code: string; message: string } } | undefined;
  return {
    ...(error?.error ? { fault: error.error } : {}),
    finishReason: finish.choices[0].finish_reason,
    usage: usage.usage,
  };
}

/** POSTs a JSON body to a /v1 route. */
export function v1(
  node: TestNode,
  route: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return node.post(`/v1/${route}`, body, { headers });
}
