/**
 * Every CUDA kernel path against the reference backend on the GPU: matrix products of all
 * weight types at odd shapes (mat-vec, chunked, cuBLAS), norms, RoPE, elementwise ops,
 * gathers and embeddings, KV stores and paged attention (decode at 4k and 16k positions
 * too), device argmax, and a batch of
 * whole-model properties (graph replay equals eager launches, batching changes nothing).
 */

import { assert, assertEquals } from "../support/assert.ts";
import { gpuOptions, gpuTest, HAS_CUBLAS } from "./support.ts";
import { ReferenceBackend } from "../../src/backend/reference/reference_backend.ts";
import { checkExpansionReuse, checkF16Overflow } from "./checks/prefill.ts";
import { createCudaBackend } from "../../src/backend/cuda/mod.ts";
import { assertClose, Pair } from "./checks/pair.ts";
import { checkMatmul, MATMUL_TYPES } from "./checks/matmul.ts";
import {
  checkArgmax,
  checkElementwise,
  checkGatherAndEmbed,
  checkHadamard,
  checkMaskedArgmax,
  checkRmsNorm,
} from "./checks/ops.ts";
import { checkNormRope, checkRope } from "./checks/rope.ts";
import { checkAttention, checkWindowedAttention } from "./checks/attention.ts";
import { checkLongDecode, LONG_DECODE_CASES } from "./checks/long_attention.ts";
import { checkCopiedRows, Decoder, smallModel } from "./checks/model.ts";
import { argmax } from "../../src/common/argmax.ts";

for (const type of MATMUL_TYPES) {
  gpuTest(
    `matmul ${type} against the reference${
      HAS_CUBLAS ? "" : " (no libcublas: mat-vec paths only)"
    }`,
    (be) => void checkMatmul(new Pair(be), type, HAS_CUBLAS),
  );
}

// The reference backend stands in for the native CPU one, whose library the bundle lacks.
gpuTest(
  "cuBLAS prefill: activations past f16's range give the reference's product",
  (be) => {
    checkF16Overflow(be, new ReferenceBackend());
  },
  {},
  true,
);

gpuTest(
  "cuBLAS prefill: a weight is expanded to f16 once and reused by later steps",
  () => {
    checkExpansionReuse((expansionBytes) => createCudaBackend(gpuOptions({ expansionBytes })));
  },
  {},
  true,
);

gpuTest("matmul without cuBLAS (prefill on the mat-vec kernels)", (be) => {
  for (const type of MATMUL_TYPES) checkMatmul(new Pair(be), type, false);
}, { cublas: false });

gpuTest("rmsNorm, siluMul, geluMul, add, addBias, scale", (be) => {
  const p = new Pair(be);
  checkRmsNorm(p);
  checkElementwise(p);
});

gpuTest("hadamard against the reference's product", (be) => {
  checkHadamard(new Pair(be));
});

gpuTest("rope in both layouts, with scaling and frequency factors", (be) => {
  checkRope(new Pair(be));
});

gpuTest("per-head norms then rope, fused and not, every rope mode", (be) => {
  checkNormRope(new Pair(be));
  const plain = createCudaBackend(gpuOptions({ fusion: false }));
  try {
    checkNormRope(new Pair(plain));
  } finally {
    plain.close();
  }
});

gpuTest("gatherRows, embed, argmaxRows (plain and under token masks)", (be) => {
  const p = new Pair(be);
  checkGatherAndEmbed(p);
  checkArgmax(p);
  checkMaskedArgmax(p);
});

gpuTest("storeKv and paged attention", (be) => checkAttention(new Pair(be)));

gpuTest("sliding-window attention", (be) => checkWindowedAttention(new Pair(be)));

gpuTest("decode attention over 4k and 16k caches (GQA, f16 and q8_0, windows)", (be) => {
  for (const c of LONG_DECODE_CASES) checkLongDecode(new Pair(be), c);
});

gpuTest("device bandwidth measured with device-to-device copies", (be) => {
  const gbs = be.bandwidthGBs();
  console.log(`device-to-device copy: ${gbs.toFixed(0)} GB/s`);
  assert(gbs > 1, `bandwidth ${gbs}`);
});

const dir = await Deno.makeTempDir();
const model = smallModel(dir, "q4_k_m");

function greedy(d: Decoder, steps: number): Float32Array[] {
  const table = Int32Array.from([3, 1, 4, 0]);
  let logits = d.backend.read(d.step([[5, 77, 300, 12]], [0], [table]));
  const out = [logits];
  for (let k = 0; k < steps; k++) {
    logits = d.backend.read(d.step([[argmax(logits)]], [4 + k], [table]));
    out.push(logits);
  }
  return out;
}

gpuTest("K/V rows copied between blocks give the logits of the rows in place", (be) => {
  const d = new Decoder(model, be);
  try {
    checkCopiedRows(d);
  } finally {
    d.close();
  }
});

gpuTest("graph replay gives the logits of kernel-by-kernel launches", (be) => {
  const d = new Decoder(model, be);
  const graphed = greedy(d, 8);
  d.close();
  assert(be.stats().graphSteps >= 4, JSON.stringify(be.stats()));
  const eagerBe = createCudaBackend(gpuOptions({ graphs: false }));
  try {
    const e = new Decoder(model, eagerBe);
    const eager = greedy(e, 8);
    e.close();
    eager.forEach((x, i) => assertEquals(Array.from(graphed[i]), Array.from(x), `step ${i}`));
  } finally {
    eagerBe.close();
  }
});

gpuTest("fused kernels give the unfused logits (to f32 rounding)", (be) => {
  const d = new Decoder(model, be);
  const fused = greedy(d, 4);
  d.close();
  const plain = createCudaBackend(gpuOptions({ fusion: false }));
  try {
    const p = new Decoder(model, plain);
    const unfused = greedy(p, 4);
    p.close();
    unfused.forEach((x, i) => assertClose(`step ${i}`, fused[i], x, 1e-5));
    assert(be.stats().launches < plain.stats().launches, "fusion launched fewer kernels");
  } finally {
    plain.close();
  }
});

gpuTest("sequences decoded together give their logits alone", (be) => {
  const d = new Decoder(model, be);
  const tables = [Int32Array.from([0, 1]), Int32Array.from([2, 3]), Int32Array.from([4, 5])];
  const prompts = [[1, 2, 3], [9, 8, 7, 6, 5], [400]];
  const alone = prompts.map((p, s) => {
    be.read(d.step([p], [0], [tables[s]]));
    return be.read(d.step([[42 + s]], [p.length], [tables[s]]));
  });
  prompts.forEach((p, s) => d.step([p], [0], [tables[s]]));
  const together = be.read(
    d.step(prompts.map((_, s) => [42 + s]), prompts.map((p) => p.length), tables),
  );
  const vocab = d.vocabSize;
  alone.forEach((a, s) => {
    assertEquals(
      Array.from(together.subarray(s * vocab, (s + 1) * vocab)),
      Array.from(a),
      `sequence ${s}`,
    );
  });
  d.close();
});

globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
