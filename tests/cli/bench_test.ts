/** `neuron bench`'s command line: what it refuses before measuring anything. */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { runNeuron } from "../support/processes.ts";
import { fixture } from "../fixtures.ts";

const MODEL = fixture("qwen3-tiny-q8_0.gguf");

Deno.test("bench: --quant goes with --synthetic only, an unknown one is refused, --repack is 0 or 1, --temperature with -c, --top-p with it, --kv-type names known types once", async () => {
  const cases: [string[], string][] = [
    [["--model", MODEL, "--quant", "q9"], "--quant"],
    [["--model", MODEL, "--quant", "q4_k_m"], "--quant"],
    [["--synthetic", "qwen3-0.6b", "--quant", "q9"], 'unknown quantization "q9"'],
    [["--model", MODEL, "--synthetic", "qwen3-0.6b"], "either --model or --synthetic"],
    [["--model", MODEL, "--repack", "yes"], "--repack takes 0 or 1"],
    [["--model", MODEL, "-c", "1", "--temperature", "0"], "--temperature takes a number"],
    [["--model", MODEL, "--temperature", "0.8"], "--temperature goes with --concurrency"],
    [["--model", MODEL, "-c", "1", "--top-p", "0.9"], "--top-p goes with --temperature"],
    [["--model", MODEL, "-c", "1", "--temperature", "1", "--top-p", "0"], "--top-p takes a number"],
    [["--model", MODEL, "--kv-type", "f16,q5_0"], 'got "q5_0"'],
    [["--model", MODEL, "--kv-type", "q8_0,f16,q8_0"], "a type twice"],
  ];
  for (const [args, text] of cases) {
    const r = await runNeuron(["bench", "-p", "1", "-n", "1", "-r", "1", ...args]);
    assertEquals(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assertStringIncludes(r.stderr, text);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});

/** `neuron bench --json` on the tiny fixture with 8-token prompts, one repetition: the last
 * line of its output, parsed. */
async function benchJson(gen: number, ...extra: string[]) {
  const args = ["--model", MODEL, "--device", "cpu", "-p", "8", "-n", `${gen}`, "-r", "1"];
  const r = await runNeuron(["bench", ...args, ...extra, "--json"]);
  assertEquals(r.code, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

Deno.test("bench: --json reports the tests run and a k = 4 verification against a one-token step", async () => {
  const report = await benchJson(4);
  assertEquals(report.results.map((m: { test: string }) => m.test), ["pp8", "tg4"]);
  const v = report.verification;
  assertEquals([v.depth, v.k], [0, 4]);
  assert(v.verify_ms > 0 && v.step_ms > 0, JSON.stringify(v));
  assert(Math.abs(v.ratio - v.verify_ms / v.step_ms) < 1e-9, JSON.stringify(v));
  const g = v.greedy;
  assert(g.verify_ms > 0 && g.step_ms > 0, JSON.stringify(g));
  assert(Math.abs(g.ratio - g.verify_ms / g.step_ms) < 1e-9, JSON.stringify(g));
});

Deno.test("bench: --kv-type f16,q8_0 runs every test on both caches and reports q8_0's tok/s against f16's", async () => {
  const report = await benchJson(2, "--kv-type", "f16,q8_0", "-d", "0,16", "-r", "2");
  assertEquals(report.kv_types, ["f16", "q8_0"]);
  const tests = report.results.map((m: { test: string; depth: number; kv_type: string }) =>
    `${m.test}@${m.depth}:${m.kv_type}`
  );
  assertEquals(tests, [
    "pp8@0:f16",
    "pp8@0:q8_0",
    "tg2@0:f16",
    "tg2@0:q8_0",
    "pp8@16:f16",
    "pp8@16:q8_0",
    "tg2@16:f16",
    "tg2@16:q8_0",
  ]);
  // A q8_0 cache holds 34 bytes per 32 values where f16 holds 64: each depth's bytes per
  // token differ by the K/V of the positions read.
  const at = (depth: number, kv: string) =>
    report.depths.find((d: { depth: number; kv_type: string }) =>
      d.depth === depth && d.kv_type === kv
    );
  assert(at(16, "q8_0").bytes_per_token < at(16, "f16").bytes_per_token, JSON.stringify(report));
  const rate = (test: string, depth: number, kv: string) =>
    report.results.find((m: { test: string; depth: number; kv_type: string }) =>
      m.test === test && m.depth === depth && m.kv_type === kv
    ).tok_s;
  assertEquals(report.kv_ratios.length, 4);
  for (const r of report.kv_ratios) {
    assertEquals([r.kv_type, r.baseline], ["q8_0", "f16"]);
    const want = rate(r.test, r.depth, "q8_0") / rate(r.test, r.depth, "f16");
    assert(Math.abs(r.ratio - want) < 1e-9 * want, JSON.stringify(r));
  }
  // Two repetitions of the first tg test on each cache at each depth: 8 bandwidth samples.
  assertEquals(report.bandwidth_samples_gbs.length, 8);
});

Deno.test("bench: --profile times the greedy step and verification op by op, adding up to their wall time", async () => {
  const p = (await benchJson(2, "--profile")).verification.profile;
  const ops = new Map<string, { calls: number; step_ms: number; verify_ms: number }>(
    p.ops.map((o: { op: string }) => [o.op, o]),
  );
  // The tiny fixture's layers: two norms and two products each, the QK norms.
  const layers = ops.get("attention")!.calls;
  assert(layers >= 1, JSON.stringify(p));
  assertEquals(ops.get("rmsnorm")!.calls, 4 * layers + 1);
  assertEquals(ops.get("matmulMany")!.calls, 2 * layers);
  assertEquals(ops.get("matmul")!.calls, 2 * layers + 1);
  for (const o of ops.values()) assert(o.step_ms >= 0 && o.verify_ms >= 0, JSON.stringify(o));
  const sum = (key: "step_ms" | "verify_ms") => [...ops.values()].reduce((a, o) => a + o[key], 0);
  assert(sum("step_ms") > 0 && sum("step_ms") <= p.step_wall_ms, JSON.stringify(p));
  assert(sum("verify_ms") > 0 && sum("verify_ms") <= p.verify_wall_ms, JSON.stringify(p));
  const text = await runNeuron([
    "bench",
    "--model",
    MODEL,
    "-p",
    "4",
    "-n",
    "2",
    "-r",
    "1",
    "--profile",
  ]);
  assertEquals(text.code, 0, text.stderr);
  assertStringIncludes(text.stdout, "| all ops |");
});

Deno.test("bench: --temperature (and --top-p) serves the streams greedy and sampled, side by side", async () => {
  const serving = await benchJson(6, "-c", "1,3", "--temperature", "0.8", "--top-p", "0.9");
  assertEquals([serving.temperature, serving.top_p], [0.8, 0.9]);
  for (const runs of [serving.concurrency, serving.sampled]) {
    assertEquals(runs.map((c: { streams: number }) => c.streams), [1, 3]);
    assert(runs.every((c: { tg: number }) => c.tg > 0), JSON.stringify(runs));
  }
});
