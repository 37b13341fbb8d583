/**
 * An in-process neuron on a free loopback port, for tests that drive the HTTP surface.
 * Log lines are captured (not printed) and handed to the test.
 */
import { captureLogs, setLogFormat } from "../../src/common/log.ts";
import { validate } from "../../src/config/mod.ts";
import { type NeuronNode, startNode } from "../../src/server/mod.ts";

export interface TestNode extends NeuronNode {
  logs: string[];
  get(path: string, init?: RequestInit): Promise<Response>;
  post(path: string, body: unknown, init?: RequestInit): Promise<Response>;
}

export async function withNode(
  raw: Record<string, unknown>,
  fn: (node: TestNode) => Promise<void>,
): Promise<void> {
  const { config } = validate({ host: "127.0.0.1", port: 0, ...raw }, "test.toml");
  const logs: string[] = [];
  setLogFormat("json");
  const restore = captureLogs((line) => logs.push(line));
  let node: NeuronNode | undefined;
  try {
    node = startNode(config);
    const base = node.url;
    const testNode: TestNode = Object.assign({}, node, {
      logs,
      get: (path: string, init?: RequestInit) => fetch(base + path, init),
      post: (path: string, body: unknown, init?: RequestInit) =>
        fetch(base + path, {
          method: "POST",
          ...init,
          headers: { "content-type": "application/json", ...init?.headers },
          body: typeof body === "string" ? body : JSON.stringify(body),
        }),
    });
    await fn(testNode);
  } finally {
    await node?.shutdown();
    restore();
  }
}

/** Reads a JSON body, failing with the text when it is not JSON. */
export async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`not JSON (status ${res.status}): ${text}`);
  }
}

/** Polls `check` until it returns a value (not undefined), or fails after `ms`. */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  ms = 5000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
