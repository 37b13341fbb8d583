/**
 * The Walsh-Hadamard rotation around a quantized KV cache (kvRotation), on a synthetic
 * Qwen3 with heads of 128 (K and q turn by chunks of 128, V and the output by 64; the golden
 * fixtures' heads are 32, no rotation, and 64, both chunks 64, so only this shape tells the
 * two chunk sizes apart):
 * - against llama.cpp live with its rotation on (its default), the same logits;
 * - what it is for: where K has outlier channels (as real Qwen3 k_norm weights make them),
 *   a quantized cache's logits stay closer to an f16 cache's than without the rotation.
 */

import { assert } from "../support/assert.ts";
import { openLlamaModel, topLogits } from "../support/llama_ref.ts";
import type { Backend, KvDType } from "../../src/backend/backend.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import { withSession } from "./session.ts";
import { HEADS_128_SHAPE } from "../gpu/checks/model.ts";

/** Four prompts of 24 to 96 tokens. */
const PROMPTS = [0, 1, 2, 3].map((k) =>
  Array.from({ length: 24 + 24 * k }, (_, i) => (i * (37 + 10 * k) + 5 + k) % 500)
);

/**
 * Measured: with the rotation on both sides the prompts' top-20 logits differ by 0.03-0.13
 * (q8_0 and q4_0, three seeds; f16 caches already differ by 0.03 here); against llama.cpp
 * unrotated a q4_0 cache differs by 0.38-0.97, and a rotation of the wrong chunks here (K
 * by 64: 0.48; V by 128: 0.24 at the first prompt) shows too.
 */
const ROTATED_TOLERANCE = 0.2;
const UNROTATED_AT_LEAST = 0.3;

/** Each prompt's last logits from the model at `path` on `be` with a cache of `dtype`. */
function promptLogits(path: string, dtype: KvDType, be: Backend): Float32Array[] {
  return withSession(path, be, (s) => PROMPTS.map((p) => s.run(p, 0, [p.length - 1]).slice()), {
    dtype,
  });
}

/** max |ours - llama.cpp| over llama.cpp's top 20 after each prompt. */
function diffs(ours: Float32Array[], theirs: (p: number[]) => Float32Array): number[] {
  return PROMPTS.map((p, i) =>
    Math.max(...topLogits(theirs(p), 20).map(([id, l]) => Math.abs(ours[i][id] - l)))
  );
}

Deno.test("heads of 128 with a q8_0 or q4_0 cache: the prompts' logits equal llama.cpp's, which rotates the cache the same way", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/rot128-q8_0.gguf`;
    writeSyntheticQwen3(path, { shape: HEADS_128_SHAPE, quant: "q8_0", seed: 3 });
    for (const kvType of ["q8_0", "q4_0"] as const) {
      const ours = promptLogits(path, kvType, new CpuBackend({ threads: 2 }));
      using rotated = await openLlamaModel(path, { kvType });
      const d = diffs(ours, (p) => rotated.logits(p));
      assert(Math.max(...d) <= ROTATED_TOLERANCE, `${kvType}: ${d.map((x) => x.toFixed(3))}`);
      if (kvType === "q4_0") {
        // The comparison can tell: unrotated, llama.cpp's q4_0 cache is far from ours.
        using plain = await openLlamaModel(path, { kvType, rotateQuantizedKv: false });
        const u = diffs(ours, (p) => plain.logits(p));
        assert(Math.min(...u) >= UNROTATED_AT_LEAST, `unrotated: ${u.map((x) => x.toFixed(3))}`);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** `be` with hadamard a no-op: the model as it runs without the rotation. */
function unrotated(be: Backend): Backend {
  return new Proxy(be, {
    get(target, key) {
      if (key === "hadamard") return () => {};
      const v = Reflect.get(target, key);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/** Sets channels 3 and 70 of every layer's k_norm weight to `weight`: two outlier features. */
function withKOutliers(path: string, weight: number): void {
  const file = openGguf(path);
  const at = file.tensors.filter((t) => t.name.endsWith("attn_k_norm.weight")).map((t) => t.offset);
  file.close();
  using f = Deno.openSync(path, { read: true, write: true });
  const bytes = new Uint8Array(new Float32Array([weight]).buffer);
  for (const offset of at) {
    for (const channel of [3, 70]) {
      f.seekSync(offset + 4 * channel, Deno.SeekMode.Start);
      f.writeSync(bytes);
    }
  }
}

Deno.test("K with outlier channels: the rotation keeps a q8_0 or q4_0 cache's logits closer to an f16 cache's", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/outliers-q8_0.gguf`;
    writeSyntheticQwen3(path, { shape: HEADS_128_SHAPE, quant: "q8_0", seed: 3 });
    withKOutliers(path, 20);
    const f16 = promptLogits(path, "f16", new CpuBackend({ threads: 2 }));
    /** Mean over the prompts of the largest change of f16's top 20. */
    const change = (q: Float32Array[]): number =>
      PROMPTS.map((_, i) =>
        Math.max(...topLogits(f16[i], 20).map(([id]) => Math.abs(q[i][id] - f16[i][id])))
      ).reduce((a, b) => a + b) / PROMPTS.length;
    // Rotated over unrotated, five seeds: q8_0 0.46-0.86 (its error is small either way),
    // q4_0 0.48-0.60.
    for (const [kvType, bound] of [["q8_0", 1], ["q4_0", 0.8]] as const) {
      const rotated = change(promptLogits(path, kvType, new CpuBackend({ threads: 2 })));
      const plain = change(promptLogits(path, kvType, unrotated(new CpuBackend({ threads: 2 }))));
      console.log(
        `${kvType}: logits change ${rotated.toFixed(3)} rotated, ${plain.toFixed(3)} not`,
      );
      assert(rotated < bound * plain, `${kvType}: ${rotated} rotated against ${plain}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
