/**
 * YaRN on the native CPU backend against llama.cpp itself, live, on a Qwen3 fixture whose
 * GGUF asks for YaRN (factor 4 over an original 40960 positions): every position's argmax
 * and top-20 logits at positions from 0, across the original context, beyond it (41000)
 * and near 128k, then 32 greedy tokens after a prompt at 41000. The tokens sit at those
 * positions with nothing before them, on both sides (shifted_rope.ts).
 */

import { assert, assertEquals } from "../support/assert.ts";
import { openLlamaModel, topLogits } from "../support/llama_ref.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import { writeYarnFixture, YARN_FACTOR, YARN_ORIGINAL_CONTEXT } from "../fixtures/yarn.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { type GgufKv, Kv } from "../../src/gguf/mod.ts";
import { argmax } from "../../src/common/argmax.ts";
import { type SessionOptions, type StepSession, withSession } from "./session.ts";
import { shiftedRope } from "./shifted_rope.ts";

/** The tiny f16 fixture's tolerance on top logits (fixtures README). */
const TOLERANCE = 0.05;
const STEPS = 32;
const PROMPTS = modelGolden("qwen3-tiny-f16").prompts;
const PROMPT = PROMPTS.find((p) => p.name === "chat_multiturn")!;
/**
 * Where each prompt starts: from 0, across the original context's end, beyond it and near
 * 128k; and 600 tokens across the end, whose distances (up to 599 positions) turn the
 * pairs YaRN's ramp mixes far enough for a ramp one pair off to show.
 */
const CASES: Array<[number[], number]> = [
  [PROMPT.tokens, 0],
  [PROMPT.tokens, 40940],
  [PROMPT.tokens, 41000],
  [PROMPT.tokens, 131040],
  [PROMPTS.find((p) => p.name === "raw_random600")!.tokens, 40900],
];

/** Every row's logits of `tokens` run in one step. */
function rows(s: StepSession, tokens: readonly number[]): Float32Array[] {
  const all = s.run(tokens, 0, tokens.map((_, i) => i));
  return tokens.map((_, i) => all.slice(i * s.vocab, (i + 1) * s.vocab));
}

/** The largest difference over `want`'s top-20 logits. */
function topDiff(got: Float32Array, want: Float32Array): number {
  return Math.max(...topLogits(want, 20).map(([id, l]) => Math.abs(got[id] - l)));
}

/** Where the single-position checks put PROMPT: beyond the original 40960. */
const FAR = 41000;

/**
 * Runs `fn` with the path of a YaRN fixture (`edit`ed) in a temporary folder and llama.cpp's
 * logits of PROMPT at FAR on it.
 */
async function withYarnReference(
  edit: (kv: Map<string, GgufKv>) => void,
  fn: (path: string, want: Float32Array[]) => void,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    const path = writeYarnFixture(dir, edit);
    using ref = await openLlamaModel(path);
    const want: Float32Array[] = [];
    ref.eachPosition(PROMPT.tokens, (_, l) => want.push(l), FAR);
    fn(path, want);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Every row's logits of PROMPT on `path` at FAR (CPU, rope shifted there). */
function oursAtFar(path: string, options: SessionOptions = {}): Float32Array[] {
  const shift = shiftedRope(new CpuBackend({ threads: 2 }));
  shift.offset = FAR;
  return withSession(path, shift.backend, (s) => rows(s, PROMPT.tokens), options);
}

/** The same argmax at every position, and top-20 logits within the tolerance. */
function assertMatches(got: Float32Array[], want: Float32Array[]): void {
  assertEquals(got.map(argmax), want.map(argmax), "argmax per position");
  const diff = Math.max(...got.map((g, i) => topDiff(g, want[i])));
  assert(diff <= TOLERANCE, `top-20 logits differ by ${diff}`);
}

Deno.test("qwen3 with YaRN metadata: logits equal llama.cpp's at positions up to 128k, beyond the original 40960", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = writeYarnFixture(dir);
    using ref = await openLlamaModel(path);
    const shift = shiftedRope(new CpuBackend({ threads: 2 }));
    withSession(path, shift.backend, (s) => {
      for (const [tokens, start] of CASES) {
        const want: Float32Array[] = [];
        ref.eachPosition(tokens, (_, l) => want.push(l), start);
        shift.offset = start;
        const got = rows(s, tokens);
        assertEquals(got.map(argmax), want.map(argmax), `argmax per position from ${start}`);
        const diff = Math.max(...got.map((g, i) => topDiff(g, want[i])));
        assert(diff <= TOLERANCE, `from ${start}: top-20 logits differ by ${diff}`);
      }
      const start = 41000;
      const steps = ref.greedy(PROMPT.tokens, STEPS, start);
      shift.offset = start;
      const got = s.greedy(PROMPT.tokens, STEPS);
      assertEquals(got.ids, steps.map((w) => w.id), "greedy tokens after a prompt at 41000");
      steps.forEach((step, k) => {
        const d = Math.max(...step.top5.map(([id, l]) => Math.abs(got.logits[k][id] - l)));
        assert(d <= TOLERANCE, `greedy step ${k}: top-5 logits differ by ${d}`);
      });
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("qwen3 with YaRN metadata: rope.scaling.attn_factor counts and the yarn_* keys do not, as for llama.cpp", async () => {
  // llama.cpp reads rope.scaling.attn_factor for every family, and the yarn_ext_factor,
  // yarn_attn_factor and yarn_beta_* keys only for others than these (a file carrying them
  // gives llama.cpp the same logits as one without).
  const edit = (kv: Map<string, GgufKv>) => {
    kv.set("qwen3.rope.scaling.attn_factor", Kv.f32(0.8));
    kv.set("qwen3.rope.scaling.yarn_ext_factor", Kv.f32(0.5));
    kv.set("qwen3.rope.scaling.yarn_attn_factor", Kv.f32(0.8));
    kv.set("qwen3.rope.scaling.yarn_beta_fast", Kv.f32(8));
    kv.set("qwen3.rope.scaling.yarn_beta_slow", Kv.f32(2));
  };
  await withYarnReference(edit, (path, want) => assertMatches(oursAtFar(path), want));
});

Deno.test("qwen3 without YaRN metadata, YaRN asked for at load: the same logits as the file that carries it", async () => {
  const yarn = {
    type: "yarn" as const,
    factor: YARN_FACTOR,
    originalContextLength: YARN_ORIGINAL_CONTEXT,
  };
  await withYarnReference(() => {}, (_, want) => {
    assertMatches(oursAtFar(fixture("qwen3-tiny-f16.gguf"), { ropeScaling: yarn }), want);
  });
});

Deno.test("qwen3 with YaRN metadata: the fixture tells YaRN from the plain rope far above the tolerance", async () => {
  // The comparison above could not pass with the file's YaRN ignored: the same tokens at
  // 41000 through the unscaled fixture land this far from llama.cpp's YaRN logits.
  await withYarnReference(() => {}, (_, want) => {
    const got = oursAtFar(fixture("qwen3-tiny-f16.gguf"));
    const diff = Math.max(...got.map((g, i) => topDiff(g, want[i])));
    assert(diff > 5 * TOLERANCE, `plain rope differs from YaRN by only ${diff}`);
  });
});
