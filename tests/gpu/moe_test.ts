/**
 * The mixture-of-experts kernels against the reference backend on a real GPU (the checks
 * the emulator runs, tests/cuda/emu_moe_test.ts): routing, the grouped expert products of
 * every kernel family (tiled ones included), the weighted sum, and the sublayer with
 * device-side expert ids.
 */

import { assertEquals } from "../support/assert.ts";
import { createCudaBackend } from "../../src/backend/cuda/mod.ts";
import { gpuOptions, gpuTest } from "./support.ts";
import { Pair } from "./checks/pair.ts";
import {
  checkCombine,
  checkMatmulExperts,
  checkMoeSublayer,
  checkRouting,
  EXPERT_TYPES,
  routedProduct,
  TILED_ONLY_TYPES,
} from "./checks/moe.ts";

gpuTest("routeExperts picks the reference's experts in its order", (be) => {
  checkRouting(new Pair(be, 7));
});

gpuTest("matmulExperts of every kernel family, grouped by expert on the device", (be) => {
  for (const type of EXPERT_TYPES) checkMatmulExperts(new Pair(be, 7), type);
  for (const type of TILED_ONLY_TYPES) checkMatmulExperts(new Pair(be, 7), type, true);
});

gpuTest("combineExperts bit for bit, and the MoE sublayer, fused and not", (be) => {
  checkCombine(new Pair(be, 7));
  const fused = checkMoeSublayer(new Pair(be, 7));
  const plain = createCudaBackend(gpuOptions({ fusion: false }));
  try {
    const unfused = checkMoeSublayer(new Pair(plain, 7));
    fused.forEach((o, i) => assertEquals(Array.from(o), Array.from(unfused[i])));
  } finally {
    plain.close();
  }
});

gpuTest(
  "a one-token route writes the grouping its products read: moe_group's launch saved",
  (be) => {
    const launches = () => be.stats().launches;
    const pair = new Pair(be, 7);
    assertEquals(routedProduct(pair, 3, launches) - routedProduct(pair, 1, launches), 1);
  },
);
