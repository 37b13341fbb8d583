/**
 * Checker for the truncations (truncation.ts) against the plain way: sort every candidate
 * by logit (ties: lower id first), cut the sorted list. Random rows with and without ties,
 * flat and peaked, NaN among them, under every combination of top-k, top-p and min-p; and
 * the draw, which lands where the cumulative weights in id order say.
 */

import { assertEquals } from "../../tests/support/assert.ts";
import { Rng } from "../gguf/mod.ts";
import { LOGIT_ROWS as ROWS } from "../../tests/support/logit_rows.ts";
import { candidates, drawFrom, keepMinP, keepTopK, keepTopP } from "./truncation.ts";

const CUTOFF = 30;

interface Cut {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
}

/** The kept ids, sorted, the plain way. */
function reference(x: Float32Array, cut: Cut): number[] {
  let max = -Infinity;
  for (const v of x) if (v > max) max = v;
  const floor = max - CUTOFF * cut.temperature;
  const cand: number[] = [];
  for (let i = 0; i < x.length; i++) if (x[i] >= floor) cand.push(i);
  cand.sort((a, b) => x[b] - x[a] || a - b);
  let n = cut.topK > 0 ? Math.min(cand.length, cut.topK) : cand.length;
  const probs = cand.slice(0, n).map((i) => Math.exp((x[i] - max) / cut.temperature));
  const total = probs.reduce((a, b) => a + b, 0);
  if (cut.topP < 1) {
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += probs[i] / total;
      if (acc >= cut.topP) {
        n = i + 1;
        break;
      }
    }
  }
  if (cut.minP > 0) {
    let keep = 1;
    while (keep < n && probs[keep] >= cut.minP * probs[0]) keep++;
    n = keep;
  }
  return cand.slice(0, n).sort((a, b) => a - b);
}

function kept(x: Float32Array, cut: Cut): number[] {
  let max = -Infinity;
  for (const v of x) if (v > max) max = v;
  const c = candidates(x, max, cut.temperature, CUTOFF);
  keepTopK(c, cut.topK);
  keepTopP(c, cut.topP);
  keepMinP(c, cut.minP);
  return [...c.ids.subarray(0, c.n)];
}

Deno.test("truncation: top-k, top-p and min-p keep what sorting every candidate keeps", () => {
  const rng = new Rng(2024);
  let cases = 0;
  for (const [name, row] of Object.entries(ROWS)) {
    for (const n of [1, 2, 7, 64, 1000, 5003]) {
      for (let r = 0; r < 6; r++) {
        const x = row(rng, n);
        for (const topK of [0, 1, 3, 40, n]) {
          for (const topP of [1, 0.05, 0.37, 0.91, 0.9993]) {
            for (const minP of [0, 0.02, 0.6]) {
              const cut = { temperature: [0.3, 0.8, 1.7][r % 3], topK, topP, minP };
              assertEquals(
                kept(x, cut),
                reference(x, cut),
                `${name} n=${n} ${JSON.stringify(cut)}`,
              );
              cases++;
            }
          }
        }
      }
    }
  }
  assertEquals(cases, 4 * 6 * 6 * 5 * 5 * 3);
});

Deno.test("truncation: the draw lands on the candidate whose cumulative weight passes u", () => {
  const x = Float32Array.of(0, Math.log(3), -100, Math.log(2), 0);
  // Weights in id order: 1, 3, (id 2 cut), 2, 1; total 7.
  const c = candidates(x, Math.log(3), 1, CUTOFF);
  assertEquals([...c.ids.subarray(0, c.n)], [0, 1, 3, 4]);
  const at = (u: number) => drawFrom(c, u);
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
