import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import type { ModelSpec } from "../config/mod.ts";
import { HarnessError } from "./errors.ts";
import type { Harness, HarnessHealth, InferenceCall, ModelInfo } from "./harness.ts";
import { NativeHarness } from "./native/mod.ts";
import { HubError } from "../hub/mod.ts";
import { HarnessRegistry } from "./registry.ts";
import { nativeSchema } from "../config/schema.ts";
import { captureLogs } from "../common/log.ts";

captureLogs(() => {});

/** A harness whose loads finish when the test says so. */
class ScriptedHarness implements Harness {
  readonly kind = "external" as const;
  readonly loaded = new Set<string>();
  loadCalls = 0;
  unloadCalls: string[] = [];
  release: (() => void) | null = null;
  failWith: Error | null = null;

  constructor(readonly name: string) {}

  start(): void {}
  health(): HarnessHealth {
    return { name: this.name, kind: this.kind, state: "ready", models: [] };
  }
  list(): ModelInfo[] {
    return [...this.loaded].map((id) => ({
      id,
      harness: this.name,
      status: "loaded",
      devices: [],
      vram_used_mb: null,
    }));
  }
  load(spec: ModelSpec): Promise<void> {
    this.loadCalls++;
    return new Promise((resolve, reject) => {
      this.release = () => {
        if (this.failWith) return reject(this.failWith);
        this.loaded.add(spec.model_id);
        resolve();
      };
    });
  }
  unload(id: string): Promise<void> {
    this.unloadCalls.push(id);
    this.loaded.delete(id);
    return Promise.resolve();
  }
  has(id: string): boolean {
    return this.loaded.has(id);
  }
  endpoint(id: string): string | null {
    return this.loaded.has(id) ? "http://localhost:1" : null;
  }
  serve(_call: InferenceCall): Promise<Response> {
    return Promise.resolve(new Response("ok"));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const spec = (model_id: string, harness = "ext"): ModelSpec => ({ model_id, harness });

Deno.test("registry: concurrent loads of one id share one attempt; then 409", async () => {
  const ext = new ScriptedHarness("ext");
  const reg = new HarnessRegistry([ext]);
  const loads = [reg.load(spec("a/b")), reg.load(spec("a/b")), reg.load(spec("a/b"))];
  assertEquals(reg.list().map((m) => [m.id, m.status]), [["a/b", "loading"]]);
  ext.release!();
  await Promise.all(loads);
  assertEquals(ext.loadCalls, 1);
  const again = await assertRejects(() => reg.load(spec("a/b")), HarnessError);
  assertEquals(again.code, "already_loaded");
  assertEquals(again.message, "model a/b is already loaded");
});

Deno.test("registry: a failed load is shared, listed as failed, and retried by the next load", async () => {
  const ext = new ScriptedHarness("ext");
  const reg = new HarnessRegistry([ext]);
  ext.failWith = new HarnessError("upstream_error", "boom");
  const both = [reg.load(spec("a/b")), reg.load(spec("a/b"))];
  ext.release!();
  for (const p of both) {
    assertEquals((await assertRejects(() => p, HarnessError)).code, "upstream_error");
  }
  assertEquals(reg.list().map((m) => [m.id, m.status, m.error]), [["a/b", "failed", "boom"]]);
  ext.failWith = null;
  const retry = reg.load(spec("a/b"));
  ext.release!();
  await retry;
  assertEquals(ext.loadCalls, 2);
  assertEquals(reg.list().map((m) => m.status), ["loaded"]);
});

Deno.test("registry: unload goes to the owning harness; unknown ids are model_not_found", async () => {
  const a = new ScriptedHarness("a");
  const b = new ScriptedHarness("b");
  const reg = new HarnessRegistry([a, b]);
  const p = reg.load(spec("m/1", "b"));
  const busy = await assertRejects(() => reg.unload("m/1"), HarnessError);
  assertEquals(busy.code, "model_loading");
  b.release!();
  await p;
  assertEquals(reg.find("m/1"), b);
  await reg.unload("m/1");
  assertEquals(b.unloadCalls, ["m/1"]);
  assertEquals(a.unloadCalls, []);
  const missing = await assertRejects(() => reg.unload("m/1"), HarnessError);
  assertEquals(missing.code, "model_not_found");
});

Deno.test("registry: candle and native name the same harness; unknown names are refused", async () => {
  // Offline with an empty cache: the hub repository cannot be had, deterministically.
  const native = new NativeHarness(
    "candle",
    nativeSchema.parse({}),
    {
      selfUrl: () => "http://localhost:13131",
    },
    undefined,
    { HF_HUB_OFFLINE: "1", HF_HUB_CACHE: "/nonexistent/neuron-test-cache" },
  );
  const reg = new HarnessRegistry([native, new ScriptedHarness("ext")]);
  assertEquals(reg.get("native"), native);
  assertEquals(reg.get("candle"), native);
  const err = await assertRejects(() => reg.load(spec("a/b", "vllm")), HarnessError);
  assertEquals(err.code, "unknown_harness");
  assertEquals(err.message, 'unknown harness "vllm" (this node has: candle, ext)');
  const eng = await assertRejects(() => reg.load(spec("a/b", "native")), HubError);
  assertEquals(eng.code, "not_cached");
  // Request errors leave nothing behind; load failures are recorded for the gateway.
  assertEquals(reg.list().map((m) => [m.id, m.status]), [["a/b", "failed"]]);
  await reg.unload("a/b");
  assertEquals(reg.list(), []);
});

Deno.test("registry: /models keeps the last 16 failed loads, forgetting the oldest", async () => {
  const ext = new ScriptedHarness("ext");
  const reg = new HarnessRegistry([ext]);
  ext.failWith = new HarnessError("upstream_error", "boom");
  for (let i = 0; i < 20; i++) {
    const p = reg.load(spec(`m/${i}`));
    ext.release!();
    await assertRejects(() => p, HarnessError);
  }
  const failed = reg.list().filter((m) => m.status === "failed").map((m) => m.id);
  assertEquals(failed, Array.from({ length: 16 }, (_, i) => `m/${i + 4}`));
});

Deno.test("registry: a model is found by its served name; a load in progress is told apart", async () => {
  const ext = new ScriptedHarness("ext");
  const reg = new HarnessRegistry([ext]);
  const p = reg.load(spec("m/1"));
  assertEquals([reg.loading("m/1"), reg.loading("m/2")], [true, false]);
  ext.release!();
  await p;
  assertEquals(reg.loading("m/1"), false);
  ext.list = () => [{
    id: "m/1",
    served_name: "short",
    harness: "ext",
    status: "loaded",
    devices: [],
    vram_used_mb: null,
  }];
  assertEquals(reg.loaded("short")?.id, "m/1");
  assertEquals(reg.loaded("m/1")?.id, "m/1");
  assertEquals(reg.loaded("other"), undefined);
});
