/**
 * The mixture-of-experts kernels (kernels/cuda/moe.cu) against the reference backend on the
 * emulated GPU: routing, the grouped expert products of every kernel family, the weighted
 * sum, and the sublayer chained with the expert ids kept on the device.
 */

import { assertEquals } from "../support/assert.ts";
import { emulator, fusionRuns } from "./support.ts";
import { Pair } from "../gpu/checks/pair.ts";
import {
  checkCombine,
  checkMatmulExperts,
  checkMoeSublayer,
  checkRouting,
  EXPERT_TYPES,
  routedProduct,
  TILED_ONLY_TYPES,
} from "../gpu/checks/moe.ts";

const emu = await emulator();

function test(name: string, fn: (pair: Pair) => void): void {
  Deno.test({
    name,
    ignore: emu === null,
    fn() {
      const be = emu!.backend();
      try {
        fn(new Pair(be, 7));
      } finally {
        be.close();
      }
    },
  });
}

test(
  "emulated CUDA: routeExperts picks the reference's experts in its order, ties included",
  checkRouting,
);

for (const type of EXPERT_TYPES) {
  test(`emulated CUDA: matmulExperts ${type} (grouped by expert on the device)`, (p) => {
    checkMatmulExperts(p, type);
  });
}

for (const type of TILED_ONLY_TYPES) {
  test(`emulated CUDA: matmulExperts ${type}, the tiled products`, (p) => {
    checkMatmulExperts(p, type, true);
  });
}

test("emulated CUDA: combineExperts bit for bit", checkCombine);

test("emulated CUDA: the MoE sublayer with device-side expert ids", checkMoeSublayer);

Deno.test({
  name: "emulated CUDA: gate and up experts fused with their silu_mul equal the three " +
    "launches bitwise, two launches fewer",
  ignore: emu === null,
  fn() {
    const runs = fusionRuns(emu!, (be) => checkMoeSublayer(new Pair(be, 7)));
    runs[1].outs.forEach((o, i) => assertEquals(Array.from(o), Array.from(runs[0].outs[i])));
    assertEquals(runs[0].launches - runs[1].launches, 2);
  },
});

Deno.test({
  name: "emulated CUDA: a one-token route writes the grouping its products read: one launch " +
    "fewer than a three-token step (moe_group's)",
  ignore: emu === null,
  fn() {
    const be = emu!.backend();
    try {
      const launches = () => be.stats().launches;
      const pair = new Pair(be, 7);
      assertEquals(routedProduct(pair, 3, launches) - routedProduct(pair, 1, launches), 1);
    } finally {
      be.close();
    }
  },
});
