/**
 * Checker for the native sampling (kernels/cpu/sample.c) against TypeScript: the same token
 * for every row kind, size, truncation and landing point (truncation.ts), and the same
 * log-prob terms to the bit (sampler.ts), whether the CPU kernel library is loaded or not.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { LOGIT_ROWS } from "../../tests/support/logit_rows.ts";
import { Rng } from "../gguf/mod.ts";
import { NativeSampling } from "./native_sampling.ts";
import { rowSummary } from "./sampler.ts";
import { draw, type DrawParams } from "./truncation.ts";

const native = NativeSampling.open();

Deno.test("native draw: the same token as truncation.ts for every row, cut and u, vector pass and plain C", () => {
  assert(native !== null, "the CPU kernel library did not load: run `deno task kernels:cpu`");
  const rng = new Rng(77);
  let cases = 0;
  for (const [name, row] of Object.entries(LOGIT_ROWS)) {
    for (const n of [1, 3, 64, 1000, 5003, 151936]) {
      const x = row(rng, n);
      for (const temperature of [0.2, 0.8, 1.7]) {
        for (const topK of [0, 1, 40]) {
          for (const topP of [1, 0.37, 0.95]) {
            for (const minP of [0, 0.05]) {
              const u = rng.float();
              const p: DrawParams = { temperature, cutoff: 30, topK, topP, minP, u };
              const want = draw(x, p), what = `${name} n=${n} ${JSON.stringify(p)}`;
              assertEquals(native.draw(x, p), want, what);
              assertEquals(native.draw(x, p, true), want, `${what} (plain C)`);
              cases++;
            }
          }
        }
      }
    }
  }
  assertEquals(cases, 4 * 6 * 3 * 3 * 3 * 2);
});

Deno.test("native draw: u walks the candidates in id order, as truncation.ts does", () => {
  assert(native !== null);
  // Weights in id order: 1, 3, (id 2 cut), 2, 1; total 7.
  const x = Float32Array.of(0, Math.log(3), -100, Math.log(2), 0);
  const at = (u: number) =>
    native.draw(x, { temperature: 1, cutoff: 30, topK: 0, topP: 1, minP: 0, u });
  assertEquals([0, 0.99 / 7, 1.01 / 7, 3.99 / 7, 4.01 / 7, 5.99 / 7, 6.01 / 7].map(at), [
    0,
    0,
    1,
    1,
    3,
    3,
    4,
  ]);
});

Deno.test("native draw: no candidate (every logit NaN, or the first) answers -1 both ways", () => {
  assert(native !== null);
  const x = new Float32Array(8).fill(NaN);
  const p: DrawParams = { temperature: 1, cutoff: 30, topK: 0, topP: 1, minP: 0, u: 0.5 };
  assertEquals(native.draw(x, p), -1);
  assertEquals(draw(x, p), -1);
  // NaN first: no value is greater than it, so it is the best logit, and nothing is within
  // its cutoff (as greedy decoding's argmax picks token 0 from such a row).
  x.fill(1).fill(NaN, 0, 1);
  assertEquals(native.draw(x, p), -1);
  assertEquals(native.draw(x, p, true), -1);
  assertEquals(draw(x, p), -1);
});

Deno.test("native log-probs: the same maximum, sum and best ids as sampler.ts, to the bit", () => {
  assert(native !== null);
  const rng = new Rng(78);
  let cases = 0;
  for (const [name, row] of Object.entries(LOGIT_ROWS)) {
    for (const n of [1, 3, 7, 64, 1001, 151936]) {
      const x = row(rng, n);
      for (const top of [0, 1, 5, 20]) {
        const want = rowSummary(x, top);
        for (const reference of [false, true]) {
          const got = native.summary(x, top, reference);
          const what = `${name} n=${n} top=${top}${reference ? " (plain C)" : ""}`;
          assertEquals([got.max, got.sum], [want.max, want.sum], what);
          assertEquals([...got.top], [...want.top], what);
          cases++;
        }
      }
    }
  }
  assertEquals(cases, 4 * 6 * 4 * 2);
});
