/**
 * Whole steps on the emulated GPU with a small synthetic model: graph replay equals
 * launching kernel by kernel, batching sequences changes nothing, batched prefill agrees
 * with token-by-token decoding, copied K/V rows serve as the originals, and every byte is
 * given back on close.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { checkCopiedRows, Decoder, smallModel } from "../gpu/checks/model.ts";
import { relError } from "../gpu/checks/pair.ts";
import { argmax } from "../../src/common/argmax.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";

const emu = await emulator();
const dir = emu ? await Deno.makeTempDir() : "";
const paths = emu ? { q4km: smallModel(dir, "q4_k_m"), q80: smallModel(dir, "q8_0") } : null;

function withDecoder(
  path: string,
  graphs: boolean,
  fn: (d: Decoder, be: CudaBackend) => void,
  fusion = true,
): void {
  resetEmulator(emu!);
  const be = emu!.backend({ graphs, fusion });
  const d = new Decoder(path, be);
  try {
    fn(d, be);
  } finally {
    d.close();
    be.close();
  }
}

/** Greedy decoding of one sequence; every step's logits. */
function decode(d: Decoder, steps: number): Float32Array[] {
  const table = Int32Array.from([3, 1, 4, 0]);
  const prompt = [5, 77, 300, 12];
  let logits = d.backend.read(d.step([prompt], [0], [table]));
  const out = [logits];
  for (let k = 0; k < steps; k++) {
    logits = d.backend.read(d.step([[argmax(logits)]], [prompt.length + k], [table]));
    out.push(logits);
  }
  return out;
}

Deno.test({
  name: "emulated CUDA: decode steps replayed from a CUDA graph equal kernel-by-kernel launches",
  ignore: emu === null,
  fn() {
    for (const path of [paths!.q4km, paths!.q80]) {
      let eager: Float32Array[] = [];
      let graphed: Float32Array[] = [];
      withDecoder(path, false, (d, be) => {
        eager = decode(d, 6);
        assertEquals(be.stats().graphSteps, 0);
      });
      withDecoder(path, true, (d, be) => {
        const before = emu!.control.stat("graph_launches");
        graphed = decode(d, 6);
        const s = be.stats();
        assert(s.captures === 1 && s.graphSteps >= 3, `graphs used: ${JSON.stringify(s)}`);
        assert(emu!.control.stat("graph_launches") - before === s.graphSteps);
      });
      graphed.forEach((g, i) => assertEquals(Array.from(g), Array.from(eager[i]), `step ${i}`));
    }
  },
});

/**
 * Launches fusion saves in a decode step: per layer, residual add + next norm (twice, the
 * last layer's "next" being the output norm's quantization), norm + quantize (twice),
 * combine + quantize, q and k norm + rope, gate + up + silu (two), and k and v merged into
 * q's launch when their weights have q's type.
 */
function expectedSavings(path: string): number {
  const file = openGguf(path);
  try {
    const type = (name: string): string => file.requireTensor(name).type.name;
    let saved = 0;
    for (let l = 0; file.tensor(`blk.${l}.attn_q.weight`) !== undefined; l++) {
      const q = type(`blk.${l}.attn_q.weight`);
      saved += 9 + (type(`blk.${l}.attn_k.weight`) === q ? 1 : 0) +
        (type(`blk.${l}.attn_v.weight`) === q ? 1 : 0);
    }
    return saved;
  } finally {
    file.close();
  }
}

Deno.test({
  name: "emulated CUDA: fused kernels give the unfused logits bitwise, with fewer launches",
  ignore: emu === null,
  fn() {
    for (const path of [paths!.q4km, paths!.q80]) {
      const launches: number[] = [];
      const logits: Float32Array[][] = [];
      for (const fusion of [false, true]) {
        withDecoder(path, false, (d, be) => {
          logits.push(decode(d, 3));
          const before = be.stats().launches;
          decode(d, 0);
          launches.push(be.stats().launches - before);
        }, fusion);
      }
      assertEquals(launches[0] - launches[1], expectedSavings(path), `launches ${launches}`);
      logits[0].forEach((l, i) =>
        assertEquals(Array.from(logits[1][i]), Array.from(l), `step ${i}`)
      );
    }
  },
});

Deno.test({
  name: "emulated CUDA: sequences decoded together give exactly their logits alone",
  ignore: emu === null,
  fn() {
    withDecoder(paths!.q4km, true, (d, be) => {
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
    });
  },
});

Deno.test({
  name: "emulated CUDA: a 20-token prefill in one batch agrees with 20 single-token steps",
  ignore: emu === null,
  fn() {
    withDecoder(paths!.q4km, true, (d, be) => {
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % 512);
      const tables = [Int32Array.from([6, 2]), Int32Array.from([5, 7])];
      const batched = be.read(d.step([prompt], [0], [tables[0]]));
      let stepped: Float32Array = new Float32Array(0);
      prompt.forEach((t, i) => (stepped = be.read(d.step([[t]], [i], [tables[1]]))));
      const err = relError(stepped, batched);
      assert(err < 0.05, `batched vs stepped logits: relative error ${err}`);
      assertEquals(argmax(stepped), argmax(batched));
    });
  },
});

Deno.test({
  name: "emulated CUDA: K/V rows copied between blocks give the logits of the rows in place",
  ignore: emu === null,
  fn() {
    withDecoder(paths!.q80, true, (d) => checkCopiedRows(d));
  },
});

Deno.test({
  name: "emulated CUDA: logits read into a caller's array equal those read into a new one",
  ignore: emu === null,
  fn() {
    withDecoder(paths!.q80, true, (d) => {
      const table = Int32Array.from([3, 1, 4, 0]);
      const logits = d.step([[5, 77, 300]], [0], [table]);
      const fresh = d.backend.read(logits);
      const into = new Float32Array(new ArrayBuffer(4 * (fresh.length + 3))).fill(-1);
      const got = d.backend.read(logits, into);
      assert(got.buffer === into.buffer && got.length === fresh.length);
      assertEquals(got, fresh);
      assertEquals(into.subarray(fresh.length), new Float32Array(3).fill(-1));
    });
  },
});

Deno.test({
  name: "emulated CUDA: close gives back every device allocation",
  ignore: emu === null,
  fn() {
    const before = emu!.control.stat("allocations");
    withDecoder(paths!.q80, true, (d) => {
      decode(d, 2);
      assert(emu!.control.stat("allocations") > before);
    });
    assertEquals(emu!.control.stat("allocations"), before);
  },
});

if (emu) {
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
}
