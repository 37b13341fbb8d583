/**
 * run.sh's preflight verdicts and table, without a GPU: a driver older than the carried PTX
 * is a failure said in words, and the table keeps every test line and bench number.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { driverVerdict } from "./preflight.ts";
import { benchRows, testRows } from "./table.ts";

Deno.test("preflight: a CUDA 12.8 driver refuses PTX ISA 9.0, a 13.0 one takes it", () => {
  const old = driverVerdict(12080, 1, "9.0");
  assertEquals([old.verdict, old.needs], ["fail", 13000]);
  assert(old.text.includes("driver CUDA 12.8 is older than PTX ISA 9.0 needs (CUDA 13.0)"));
  assertEquals(driverVerdict(13000, 1, "9.0").verdict, "ok");
  assertEquals(driverVerdict(13020, 2, "9.0").verdict, "ok");
  assertEquals(driverVerdict(13000, 1, "9.9").verdict, "warn");
  assertEquals(driverVerdict(13000, 1, null).verdict, "fail");
});

Deno.test("table: one row per test result, and each speed next to its roofline", () => {
  const log = [
    "running 3 tests from ./tests/gpu/kernels_test.ts",
    "gpu: matmul Q4_K against the reference ... ok (594ms)",
    "gpu: sliding-window attention ... FAILED (1s)",
    "gpu: engine Worker ... ignored (0ms)",
    "  step ... ok (1ms)",
  ].join("\n");
  assertEquals(testRows(log, "test_gpu"), [
    ["test_gpu: gpu: matmul Q4_K against the reference", "ok (594ms)", ""],
    ["test_gpu: gpu: sliding-window attention", "FAILED (1s)", ""],
    ["test_gpu: gpu: engine Worker", "ignored (0ms)", ""],
  ]);
  const result = {
    model: "m",
    pp: 1000,
    ppTokens: 512,
    tg: 50,
    tgTokens: 128,
    bandwidthGBs: 4000,
    bytesPerToken: 4e9,
    grid: [{
      streams: 16,
      context: 4096,
      decodeTokS: 400,
      decodeRoofline: 800,
      prefillTokS: 900,
      prefillRoofline: 1800,
      bytesPerStep: 8e9,
    }],
  };
  const rows = benchRows([result]);
  assertEquals(rows.map((r) => r[0]), [
    "m prefill pp512",
    "m decode tg128, 1 stream",
    "m prefill to 4096 context",
    "m decode, 16 streams, 4096 context",
  ]);
  assertEquals(rows[1].slice(1), ["50.0 tok/s", "1000 tok/s (5%)"]);
  assertEquals(rows[3].slice(1), ["400 tok/s", "800 tok/s (50%)"]);
  // A later pass (the long contexts) adds only its own rows.
  const later = benchRows([{ ...result, pp: 1, tg: 1 }], false);
  assertEquals(later.map((r) => r[0]), rows.slice(2).map((r) => r[0]));
});
