import { assert, assertEquals, assertNotEquals, assertThrows } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import {
  dequantize,
  type FileType,
  GgufError,
  type GgufFile,
  openGguf,
  requireNumber,
  requireStringArray,
} from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import {
  QWEN3_SHAPES,
  type Qwen3Hparams,
  qwen3TensorPlan,
  writeSyntheticQwen3,
} from "./qwen3_synthetic.ts";

const TINY: Qwen3Hparams = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 32,
  ffn: 192,
  vocab: 151936,
  tiedOutput: true,
};
const SMALL: Qwen3Hparams = {
  hidden: 256,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  ffn: 768,
  vocab: 151936,
  tiedOutput: false,
};

function withFile<T>(path: string, fn: (f: GgufFile) => T): T {
  const f = openGguf(path);
  try {
    return fn(f);
  } finally {
    f.close();
  }
}

function table(f: GgufFile): Array<[string, string, number[]]> {
  return f.tensors.map((t) => [t.name, t.type.name, t.ne]);
}

function planTable(hp: Qwen3Hparams, quant: FileType): Array<[string, string, number[]]> {
  return qwen3TensorPlan(hp, quant).map((t) => [t.name, t.type.name, t.ne]);
}

function withTempDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "neuron-qwen3-" });
  try {
    fn(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test("the tensor plan reproduces llama.cpp's fixtures: names, order, shapes and mixes", () => {
  const cases: Array<[string, Qwen3Hparams, FileType]> = [
    ["qwen3-tiny-q8_0.gguf", TINY, "q8_0"],
    ["qwen3-tiny-q4_0.gguf", TINY, "q4_0"],
    ["qwen3-small-q4_k_m.gguf", SMALL, "q4_k_m"],
  ];
  for (const [name, hp, quant] of cases) {
    assertEquals(planTable(hp, quant), withFile(fixture(name), table), name);
  }
  // The converter's F16 file lists tensors in another order; the set is the same.
  const byName = (rows: Array<[string, string, number[]]>) =>
    rows.sort((a, b) => a[0] < b[0] ? -1 : 1);
  assertEquals(
    byName(planTable(TINY, "f16")),
    byName(withFile(fixture("qwen3-tiny-f16.gguf"), table)),
  );
});

Deno.test("Qwen3-0.6B and 8B Q4_K_M plans follow llama.cpp's Q4_K_M rules", () => {
  const q6Layers = (hp: Qwen3Hparams, what: string) =>
    qwen3TensorPlan(hp, "q4_k_m")
      .filter((t) => t.name.endsWith(`${what}.weight`) && t.type.name === "Q6_K")
      .map((t) => Number(t.name.split(".")[1]));
  const small = qwen3TensorPlan(QWEN3_SHAPES["qwen3-0.6b"], "q4_k_m");
  assertEquals(small.length, 3 + 28 * 11 - 1);
  assertEquals(small.find((t) => t.name === "token_embd.weight")!.type.name, "Q6_K"); // tied: it is the output
  const more06 = [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27];
  assertEquals(q6Layers(QWEN3_SHAPES["qwen3-0.6b"], "attn_v"), more06);
  assertEquals(q6Layers(QWEN3_SHAPES["qwen3-0.6b"], "ffn_down"), more06);
  const big = qwen3TensorPlan(QWEN3_SHAPES["qwen3-8b"], "q4_k_m");
  assertEquals(big.find((t) => t.name === "output.weight")!.type.name, "Q6_K");
  assertEquals(big.find((t) => t.name === "token_embd.weight")!.type.name, "Q4_K");
  const more8 = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35];
  assertEquals(q6Layers(QWEN3_SHAPES["qwen3-8b"], "ffn_down"), more8);
  for (const t of big) {
    const want = t.isNorm ? "F32" : t.name === "output.weight" ||
        (/attn_v|ffn_down/.test(t.name) && more8.includes(Number(t.name.split(".")[1])))
      ? "Q6_K"
      : "Q4_K";
    assertEquals(t.type.name, want, t.name);
  }
  // Rows that are not whole super-blocks fall back like llama-quantize: Q4_K -> Q5_0, Q6_K -> Q8_0.
  const odd = qwen3TensorPlan({ ...SMALL, hidden: 96, ffn: 160 }, "q4_k_m");
  assertEquals(odd.find((t) => t.name === "blk.0.attn_q.weight")!.type.name, "Q5_0");
  assertEquals(odd.find((t) => t.name === "output.weight")!.type.name, "Q8_0");
});

Deno.test("a small synthetic model reopens with the right table, metadata and sane weights", () => {
  withTempDir((dir) => {
    const hp: Qwen3Hparams = { ...SMALL, vocab: 2000, layers: 3 };
    const path = `${dir}/small.gguf`;
    const layout = writeSyntheticQwen3(path, { shape: hp, quant: "q4_k_m", seed: 5 });
    assertEquals(layout.size, Deno.statSync(path).size);
    withFile(path, (f) => {
      assertEquals(table(f), planTable(hp, "q4_k_m"));
      const fixtureKeys = withFile(fixture("qwen3-small-q4_k_m.gguf"), (s) => [...s.kv.keys()]);
      const keys = (ks: string[]) =>
        ks.filter((k) => !/^general\.(name|basename|size_label)$/.test(k)).sort();
      assertEquals(keys([...f.kv.keys()]), keys(fixtureKeys));
      for (
        const [key, want] of Object.entries({
          "qwen3.block_count": 3,
          "qwen3.embedding_length": 256,
          "qwen3.feed_forward_length": 768,
          "qwen3.attention.head_count": 4,
          "qwen3.attention.head_count_kv": 2,
          "qwen3.attention.key_length": 64,
          "general.file_type": 15,
        })
      ) assertEquals(requireNumber(f, key), want, key);
      for (const t of f.tensors) {
        const v = dequantize(t.type, f.data(t), t.nElements);
        let s = 0;
        for (const x of v) {
          if (!Number.isFinite(x)) throw new Error(`${t.name}: ${x}`);
          s += x * x;
        }
        const rms = Math.sqrt(s / v.length);
        if (t.ne.length === 1) assert(v.every((x) => x >= 0.9 && x <= 1.1), t.name);
        else assert(Math.abs(rms * Math.sqrt(t.ne[0]) - 1) < 0.1, `${t.name}: RMS ${rms}`);
      }
      const tok = loadTokenizer(f);
      const text = "Hello, wörld! 你好 <|im_start|>user\n";
      const ids = tok.encode(text, { parseSpecial: true });
      assertEquals(tok.decode(ids), text);
      assert(ids.includes(requireStringArray(f, "tokenizer.ggml.tokens").indexOf("<|im_start|>")));
    });
  });
});

Deno.test("synthetic models are reproducible from their seed", () => {
  withTempDir((dir) => {
    const hp: Qwen3Hparams = { ...TINY, vocab: 300, ffn: 128 };
    const write = (name: string, seed: number) => {
      writeSyntheticQwen3(`${dir}/${name}`, { shape: hp, quant: "q8_0", seed });
      return Deno.readFileSync(`${dir}/${name}`);
    };
    const a = write("a.gguf", 1);
    assertEquals(write("b.gguf", 1), a);
    assertNotEquals(write("c.gguf", 2), a);
  });
});

Deno.test("vocabFrom copies a real vocabulary's tokenizer metadata exactly", () => {
  withTempDir((dir) => {
    const path = `${dir}/vocab.gguf`;
    writeSyntheticQwen3(path, {
      shape: TINY,
      quant: "q8_0",
      vocabFrom: fixture("qwen3-vocab.gguf"),
    });
    const tokenizerKv = (f: GgufFile) => [...f.kv].filter(([k]) => k.startsWith("tokenizer."));
    assertEquals(withFile(path, tokenizerKv), withFile(fixture("qwen3-vocab.gguf"), tokenizerKv));
  });
});

Deno.test("impossible synthetic models are refused with a clear error and no file", () => {
  withTempDir((dir) => {
    const path = `${dir}/bad.gguf`;
    const refuse = (options: Parameters<typeof writeSyntheticQwen3>[1], code: string) => {
      assertEquals(assertThrows(() => writeSyntheticQwen3(path, options), GgufError).code, code);
      assertEquals([...Deno.readDirSync(dir)].length, 0);
    };
    refuse({
      shape: { ...TINY, vocab: 1000 },
      quant: "q8_0",
      vocabFrom: fixture("qwen3-vocab.gguf"),
    }, "gguf_bad_value");
    refuse({ shape: { ...TINY, vocab: 100 }, quant: "q8_0" }, "gguf_bad_value");
    refuse({ shape: { ...TINY, kvHeads: 3 }, quant: "q8_0" }, "gguf_bad_value");
    refuse({ shape: { ...TINY, layers: 0 }, quant: "q8_0" }, "gguf_bad_value");
    refuse({ shape: { ...TINY, hidden: 48, vocab: 300 }, quant: "q4_0" }, "gguf_bad_tensor");
    refuse({ shape: TINY, quant: "q7" as FileType }, "gguf_bad_value");
  });
});
