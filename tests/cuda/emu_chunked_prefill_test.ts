/**
 * A prompt fed in chunks whose first steps ask for no logit rows (the engine's chunked
 * prefill) on the emulated GPU.
 *
 * Such a chunk's product rows go where their count sends them: under GEMM_MIN_TOKENS rows
 * to the q8_1 mat-vec kernels (activations rounded through q8_1, as llama.cpp's CPU and
 * our CPU backend round them through q8_0), from it to cuBLAS (activations in f16, nearly
 * exact). So with cuBLAS a chunked prompt's logits differ from the whole prompt's by that
 * rounding (about 0.5 on the q8_0 fixture, what llama.cpp's logits differ from a float64
 * forward pass by: see the fixture README), though each path is within the fixture's
 * tolerance of llama.cpp. Without cuBLAS every row takes the same path whatever the chunking,
 * and the chunked prompt must give the whole prompt's logits bit for bit.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { fixture, LOGIT_TOLERANCE } from "../fixtures.ts";
import { type StepSession, withSession } from "../models/session.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";

const emu = await emulator();

/** 72 tokens with designed successors (ids < 151579). */
const PROMPT = Array.from({ length: 72 }, (_, i) => 1000 + ((i * 7919) % 50000));
/** Two logit-less chunks (the tiled prefill kernel, then the split one), then the rest. */
const CHUNKS = [30, 5, 37];

function chunked(s: StepSession): Float32Array {
  let logits: Float32Array = new Float32Array(0);
  let at = 0;
  CHUNKS.forEach((n, c) => {
    const last = c === CHUNKS.length - 1;
    logits = s.run(PROMPT.slice(at, at + n), at, last ? [n - 1] : []);
    assertEquals(logits.length, last ? s.vocab : 0, `chunk ${c}: logits returned`);
    at += n;
  });
  return logits;
}

function whole(s: StepSession): Float32Array {
  return s.run(PROMPT, 0, [PROMPT.length - 1]);
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  assertEquals(a.length, b.length, "logit counts");
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

Deno.test({
  name: "emulated CUDA: a prompt in chunks without logit rows equals the whole prompt and the CPU",
  ignore: emu === null,
  fn() {
    const path = fixture("qwen3-tiny-q8_0.gguf");
    const run = (cublas: boolean, fn: (s: StepSession) => Float32Array): Float32Array => {
      resetEmulator(emu!);
      return withSession(path, emu!.backend({ cublas }), fn);
    };
    const same = maxDiff(run(false, chunked), run(false, whole));
    assert(same === 0, `chunked vs whole on the mat-vec path: ${same}`);
    const cpu = withSession(path, new CpuBackend({ threads: 1 }), whole);
    const d = maxDiff(run(true, chunked), cpu);
    const bound = LOGIT_TOLERANCE["qwen3-tiny-q8_0"];
    assert(d <= bound, `chunked (cuBLAS) vs the CPU: ${d} > ${bound}`);
  },
});
