/**
 * A neuron whose external harness fronts a fake upstream process (tests/support/
 * fake_upstream.ts), for the external harness's tests.
 */
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { startUpstream, type Upstream, type UpstreamOptions } from "../support/processes.ts";

export type Json = Record<string, unknown>;

export const MODEL = "Qwen/Qwen3-8B";

export function externalConfig(endpoint: string, extra: Json = {}, name = "mistralrs"): Json {
  return {
    harnesses: [{ name: "native" }, { name, endpoint, ...extra }],
  };
}

/** Runs `fn` with an upstream and a node fronting it as harness `name`, once it lists models. */
export async function withUpstream(
  opts: UpstreamOptions,
  fn: (up: Upstream, node: TestNode) => Promise<void>,
  extra: Json = {},
  name = "mistralrs",
): Promise<void> {
  const up = await startUpstream(opts);
  try {
    await withNode({ ...externalConfig(up.url, {}, name), ...extra }, async (node) => {
      await eventually(
        async () => {
          const models = await jsonOf(await node.get("/models")) as Json[];
          return models.length > 0 ? true : undefined;
        },
        10_000,
        "the upstream's models to appear",
      );
      await fn(up, node);
    });
  } finally {
    await up.stop();
  }
}

const enc = new TextEncoder();

export function chatBody(stream: boolean, maxTokens = 5, model = MODEL): string {
  // Odd spacing and a non-ASCII character: the upstream must receive exactly these bytes.
  return `{"model": "${model}",  "stream": ${stream}, "max_tokens": ${maxTokens}, "messages":[{"role":"user","content":"héllo"}]}`;
}

export async function sha256(bytes: string | Uint8Array<ArrayBuffer>): Promise<string> {
  const data = typeof bytes === "string" ? enc.encode(bytes) : bytes;
  const d = await crypto.subtle.digest("SHA-256", data);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The body the upstream received for request `id`, as its events recorded it. */
export async function bodySeen(up: Upstream, id: string): Promise<string> {
  const line = (await up.events()).find((e) => e.startsWith(`body ${id} `));
  if (!line) throw new Error(`the upstream saw no request ${id}`);
  return JSON.parse(line.slice(`body ${id} `.length));
}

/** The models the node lists, by id. */
export async function modelsById(node: TestNode): Promise<Record<string, Json>> {
  const models = await jsonOf(await node.get("/models")) as Json[];
  return Object.fromEntries(models.map((m) => [m.id, m]));
}
