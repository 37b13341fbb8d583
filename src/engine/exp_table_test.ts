import { assert, assertEquals } from "../../tests/support/assert.ts";
import { EXP_RANGE, expNeg } from "./exp_table.ts";

Deno.test("expNeg: within 1e-11 of Math.exp over [0, 64), 0 past it", () => {
  let worst = 0;
  for (let i = 0; i <= 2_000_000; i++) {
    const s = (i / 2_000_000) * EXP_RANGE * 0.9999999;
    worst = Math.max(worst, Math.abs(expNeg(s) / Math.exp(-s) - 1));
  }
  // Table points themselves, and the neighbourhood of every step boundary.
  for (let k = 0; k < EXP_RANGE * 256; k++) {
    for (const s of [k / 256, k / 256 + 1e-12, (k + 1) / 256 - 1e-12]) {
      worst = Math.max(worst, Math.abs(expNeg(s) / Math.exp(-s) - 1));
    }
  }
  assert(worst < 1e-11, `relative error ${worst}`);
  assertEquals(expNeg(0), 1);
  assertEquals([expNeg(EXP_RANGE), expNeg(1e9), expNeg(Infinity)], [0, 0, 0]);
});
