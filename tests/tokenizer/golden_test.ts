/**
 * The tokenizer against llama.cpp's goldens: every string of golden/tokenizer.json with
 * and without special-token parsing, the prompts of every model golden, decoding back, the
 * end-of-generation set, streaming detokenization, and the cost of loading and of a
 * pathological word.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { growth } from "../support/growth.ts";
import { fixture, MODEL_FIXTURES, modelGolden } from "../fixtures.ts";
import { GgufFile, type GgufValue, openGguf } from "../../src/gguf/mod.ts";
import { IncrementalDetokenizer, loadTokenizer, type Tokenizer } from "../../src/tokenizer/mod.ts";

interface TokenizerCase {
  name: string;
  text: string;
  text_utf8_hex: string;
  llama_cpp: { parse_special: number[]; no_parse_special: number[] };
}

const golden: { cases: TokenizerCase[] } = JSON.parse(
  Deno.readTextFileSync(fixture("golden/tokenizer.json")),
);

const vocabFile = openGguf(fixture("qwen3-vocab.gguf"));
const tokenizer: Tokenizer = loadTokenizer(vocabFile);

Deno.test("golden texts are the bytes they claim to be", () => {
  for (const c of golden.cases) {
    const hex = Array.from(new TextEncoder().encode(c.text), (b) => b.toString(16).padStart(2, "0"))
      .join("");
    assertEquals(hex, c.text_utf8_hex, c.name);
  }
});

Deno.test("every golden string tokenizes to llama.cpp's ids with special tokens parsed", () => {
  for (const c of golden.cases) {
    const ids = tokenizer.encode(c.text, { parseSpecial: true, addSpecial: true });
    assertEquals(ids, c.llama_cpp.parse_special, c.name);
  }
});

Deno.test("every golden string tokenizes to llama.cpp's ids with special tokens as text", () => {
  for (const c of golden.cases) {
    const ids = tokenizer.encode(c.text, { parseSpecial: false, addSpecial: true });
    assertEquals(ids, c.llama_cpp.no_parse_special, c.name);
  }
});

Deno.test("golden ids decode back to the input, in one go and token by token", () => {
  for (const c of golden.cases) {
    for (const ids of [c.llama_cpp.parse_special, c.llama_cpp.no_parse_special]) {
      assertEquals(tokenizer.decode(ids), c.text, c.name);
      const detok = new IncrementalDetokenizer(tokenizer, { special: true });
      let streamed = "";
      for (const id of ids) {
        const piece = detok.push(id);
        // A piece never ends in the first half of a surrogate pair.
        assert(!/[\ud800-\udbff]$/.test(piece), `${c.name}: split character`);
        streamed += piece;
      }
      streamed += detok.finish();
      assertEquals(streamed, c.text, c.name);
    }
  }
});

Deno.test("every text and chat prompt of the model goldens tokenizes to its golden tokens", () => {
  for (const model of MODEL_FIXTURES) {
    const file = openGguf(fixture(`${model}.gguf`));
    try {
      const tok = loadTokenizer(file);
      let checked = 0;
      for (const prompt of modelGolden(model).prompts) {
        if (prompt.text === undefined) continue; // raw-id prompts have no text
        assertEquals(
          tok.encode(prompt.text, { parseSpecial: true, addSpecial: true }),
          prompt.tokens,
          `${model} ${prompt.name}`,
        );
        checked++;
      }
      assertEquals(checked, 10, `${model}: text and chat prompts`);
    } finally {
      file.close();
    }
  }
});

Deno.test("the end-of-generation set is llama.cpp's", () => {
  assertEquals(
    [...tokenizer.eogIds].sort((a, b) => a - b),
    [128247, 151643, 151645, 151662, 151663, 151664],
  );
  assertEquals(tokenizer.eosId, 151645);
  assertEquals(tokenizer.bosId, 151643);
});

Deno.test("decode with skipSpecial drops control tokens and keeps <think>", () => {
  const ids = tokenizer.encode("<|im_start|>assistant\n<think>\nhi\n</think>\n\nyo<|im_end|>", {
    parseSpecial: true,
  });
  assertEquals(
    tokenizer.decode(ids, { skipSpecial: true }),
    "assistant\n<think>\nhi\n</think>\n\nyo",
  );
});

Deno.test("a 100 kB word of random letters tokenizes in linear-ish time", () => {
  const word = (n: number): string => {
    let seed = 42, w = "";
    for (let i = 0; i < n; i++) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      w += String.fromCharCode(0x61 + ((seed >>> 16) % 26));
    }
    return w;
  };
  const long = word(100_000);
  assertEquals(tokenizer.decode(tokenizer.encode(long)), long);
  // Four times the letters: about four times the time (n log n), sixteen if quadratic.
  const ratio = growth(word, (w) => tokenizer.encode(w), 25_000);
  assert(ratio < 10, `4x the letters took ${ratio.toFixed(1)}x the time`);
});

Deno.test("building the tokenizer's tables takes time linear in the vocabulary", () => {
  // The vocabulary's first n tokens and merges, as a file of their own: ids past n fall
  // back as in any file, merges of missing tokens take ids past the vocabulary.
  const first = (n: number): GgufFile => {
    const kv = new Map(vocabFile.kv);
    for (
      const key of ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]
    ) {
      const entry = vocabFile.kv.get(key)!;
      kv.set(key, { ...entry, value: (entry.value as unknown[]).slice(0, n) as GgufValue });
    }
    const f = vocabFile;
    return new GgufFile(f.version, kv, [], f.alignment, f.dataOffset, f.source, undefined);
  };
  assertEquals(loadTokenizer(first(1000)).size, 1000);
  // Four times the tokens: sixteen times the time if quadratic; ~7x measured, four for
  // the work and the rest the larger tables falling out of the caches.
  const ratio = growth(first, (f) => loadTokenizer(f), 30_000, 4, 5);
  assert(ratio < 12, `4x the vocabulary took ${ratio.toFixed(1)}x the time`);
});

Deno.test("tokenizing in windows of any size gives encode's ids", () => {
  const pieces = [
    "Hello",
    " world",
    "'s",
    "'re",
    "'LL",
    "don't",
    "12345",
    "3.14",
    "ñandú",
    "日本語",
    "🙂",
    "\u00a0",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    " \n ",
    "!!",
    "?!\n",
    "...",
    "<|im_start|>",
    "<think>",
    "a",
    "Z",
    "\u2028",
    "x1y2",
    "—",
    // Whitespace runs longer than the pre-tokenizer's lookahead, with newlines inside.
    " ".repeat(30),
    "\t".repeat(20) + "\n",
    "\n" + " ".repeat(25),
    " \n".repeat(12),
  ];
  let seed = 7;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed % n;
  };
  const texts = [
    // A window that ends inside this run sees its first newline only.
    "a\n" + " ".repeat(100) + "\nb",
    ...Array.from(
      { length: 200 },
      () => Array.from({ length: 20 + next(300) }, () => pieces[next(pieces.length)]).join(""),
    ),
  ];
  for (const text of texts) {
    for (const parseSpecial of [true, false]) {
      const whole = tokenizer.encode(text, { parseSpecial });
      for (const window of [1, 7, 20, 33, 100]) {
        const slices = tokenizer.encodeInSlices(text, { parseSpecial }, window);
        let r = slices.next();
        while (!r.done) r = slices.next();
        assertEquals(r.value, whole, `window ${window}: ${JSON.stringify(text)}`);
      }
    }
  }
  for (const c of golden.cases) {
    const slices = tokenizer.encodeInSlices(c.text, { parseSpecial: true }, 5);
    let r = slices.next();
    while (!r.done) r = slices.next();
    assertEquals(r.value, c.llama_cpp.parse_special, c.name);
  }
});

Deno.test("a text of n bytes has at least n / maxTokenBytes tokens", () => {
  const most = tokenizer.maxTokenBytes;
  assert(most >= 16 && most <= 1024, `max token bytes ${most}`);
  for (const c of golden.cases) {
    const bytes = new TextEncoder().encode(c.text).length;
    const ids = tokenizer.encode(c.text, { parseSpecial: true });
    assert(ids.length >= Math.ceil(bytes / most), c.name);
  }
});
