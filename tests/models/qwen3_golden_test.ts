/**
 * The Qwen3 forward pass on the native CPU backend against llama.cpp's goldens, for every
 * model fixture: argmax at every prompt position (prompt evaluated in batches), the
 * last position's top-20 logits within the fixture's tolerance, the 32-step greedy
 * continuation decoded one token at a time, and prefill vs token-by-token agreement.
 */

import { assert, assertEquals } from "../support/assert.ts";
import {
  fixture,
  type GoldenPrompt,
  LOGIT_TOLERANCE,
  MODEL_FIXTURES,
  type ModelFixture,
  modelGolden,
} from "../fixtures.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { type StepSession, withSession } from "./session.ts";

const CHUNK = 128;

function topDiff(logits: Float32Array, expected: Array<[number, number]>): number {
  return Math.max(...expected.map(([id, l]) => Math.abs(logits[id] - l)));
}

function checkPrompt(s: StepSession, p: GoldenPrompt, tolerance: number, vocab: number): void {
  // Batched prefill, every position's logits.
  const argmaxes: number[] = [];
  let last: Float32Array = new Float32Array(0);
  for (let start = 0; start < p.tokens.length; start += CHUNK) {
    const chunk = p.tokens.slice(start, start + CHUNK);
    const rows = chunk.map((_, i) => i);
    const logits = s.run(chunk, start, rows);
    for (const r of rows) argmaxes.push(argmax(logits.subarray(r * vocab, (r + 1) * vocab)));
    last = logits.slice((chunk.length - 1) * vocab, chunk.length * vocab);
  }
  assertEquals(argmaxes, p.argmax_per_position, `${p.name}: argmax per position`);
  const diff = topDiff(last, p.last_topk);
  assert(diff <= tolerance, `${p.name}: top-20 logits differ by ${diff} > ${tolerance}`);

  // Greedy, one token per step.
  const greedy: number[] = [argmax(last)];
  for (let k = 1; k < p.greedy.length; k++) {
    const logits = s.run([greedy[k - 1]], p.tokens.length + k - 1, [0]);
    greedy.push(argmax(logits));
    const d = topDiff(logits, p.greedy[k].top5);
    assert(d <= tolerance, `${p.name}: greedy step ${k} top-5 logits differ by ${d}`);
  }
  assertEquals(greedy, p.greedy.map((g) => g.id), `${p.name}: greedy continuation`);
}

function withModel(
  name: ModelFixture,
  fn: (s: StepSession, vocab: number) => void,
  mmap = true,
): void {
  withSession(fixture(`${name}.gguf`), new CpuBackend({ threads: 2, mmap }), (s) => fn(s, s.vocab));
}

for (const name of MODEL_FIXTURES) {
  Deno.test(`${name}: every golden prompt matches llama.cpp (argmax, top-20, greedy)`, () => {
    const golden = modelGolden(name);
    withModel(name, (s, vocab) => {
      for (const p of golden.prompts) checkPrompt(s, p, LOGIT_TOLERANCE[name], vocab);
    });
  });
}

Deno.test("qwen3-small-q4_k_m: weights copied off the mmap (mmap = false) still match llama.cpp", () => {
  const golden = modelGolden("qwen3-small-q4_k_m");
  withModel("qwen3-small-q4_k_m", (s, vocab) => {
    for (const p of golden.prompts) checkPrompt(s, p, LOGIT_TOLERANCE["qwen3-small-q4_k_m"], vocab);
  }, false);
});

Deno.test("qwen3-tiny-q8_0: one-batch prefill and token-by-token decode agree", () => {
  const golden = modelGolden("qwen3-tiny-q8_0");
  const p = golden.prompts.find((q) => q.name === "chat_tool_result")!;
  withModel("qwen3-tiny-q8_0", (s) => {
    const batched = s.run(p.tokens, 0, [p.tokens.length - 1]);
    let stepped: Float32Array = new Float32Array(0);
    p.tokens.forEach((id, i) => (stepped = s.run([id], i, [0])));
    let worst = 0;
    for (let i = 0; i < batched.length; i++) {
      worst = Math.max(worst, Math.abs(batched[i] - stepped[i]));
    }
    assert(worst < 0.05, `batched vs stepped logits differ by ${worst}`);
    assertEquals(argmax(batched), p.greedy[0].id);
  });
});

Deno.test("qwen3-tiny-f16: all logits at the last chat_system position match llama.cpp's dump", () => {
  const golden = modelGolden("qwen3-tiny-f16");
  const p = golden.prompts.find((q) => q.name === "chat_system")!;
  const bin = Deno.readFileSync(fixture("golden/qwen3-tiny-f16.last_logits.bin"));
  const expected = new Float32Array(bin.buffer, bin.byteOffset, bin.byteLength / 4);
  withModel("qwen3-tiny-f16", (s) => {
    const logits = s.run(p.tokens, 0, [p.tokens.length - 1]);
    let worst = 0;
    for (let i = 0; i < expected.length; i++) {
      worst = Math.max(worst, Math.abs(logits[i] - expected[i]));
    }
    assert(worst < 0.05, `full logits differ by up to ${worst}`);
  });
});
