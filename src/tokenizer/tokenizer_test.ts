import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import {
  encodeGguf,
  type GgufFile,
  type GgufKv,
  GgufValueType,
  Kv,
  parseGgufBytes,
} from "../gguf/mod.ts";
import { IncrementalDetokenizer } from "./detokenizer.ts";
import { TokenizerError } from "./errors.ts";
import { loadTokenizer, type Tokenizer } from "./tokenizer.ts";
import { utf8Length } from "./unicode.ts";

const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;
const UNUSED = 5;

interface VocabSpec {
  model?: string;
  pre?: string;
  extra?: [string, number][];
  merges?: string[];
  meta?: Record<string, GgufKv>;
}

// Single printable ASCII characters, plus "Ġ" (the byte-level space), all NORMAL.
const BASE = [
  ..."Ġ",
  ...Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)),
];

function vocabFile(spec: VocabSpec): GgufFile {
  const texts = [...BASE, ...(spec.extra ?? []).map(([t]) => t)];
  const types = Int32Array.from([
    ...BASE.map(() => NORMAL),
    ...(spec.extra ?? []).map(([, type]) => type),
  ]);
  const kv = new Map<string, GgufKv>([
    ["tokenizer.ggml.model", Kv.string(spec.model ?? "gpt2")],
    ["tokenizer.ggml.pre", Kv.string(spec.pre ?? "qwen2")],
    ["tokenizer.ggml.tokens", Kv.strings(texts)],
    ["tokenizer.ggml.token_type", Kv.array(GgufValueType.INT32, types)],
    ["tokenizer.ggml.merges", Kv.strings(spec.merges ?? [])],
    ...Object.entries(spec.meta ?? {}),
  ]);
  return parseGgufBytes(encodeGguf({ kv, tensors: [] }));
}

function texts(tok: Tokenizer, ids: number[]): string[] {
  return ids.map((id) => tok.tokenText(id));
}

Deno.test("llama-bpe emits a word that is a token whole; qwen2 runs the merges", () => {
  const extra: [string, number][] = [["hello", NORMAL]];
  const llama = loadTokenizer(vocabFile({ pre: "llama-bpe", extra }));
  const qwen = loadTokenizer(vocabFile({ pre: "qwen2", extra }));
  assertEquals(texts(llama, llama.encode("hello")), ["hello"]);
  assertEquals(texts(qwen, qwen.encode("hello")), ["h", "e", "l", "l", "o"]);
});

Deno.test("llama-bpe groups digits by three, qwen2 splits every digit", () => {
  const spec = {
    extra: [["12", NORMAL], ["123", NORMAL], ["45", NORMAL]] as [string, number][],
    merges: ["1 2", "12 3", "4 5"],
  };
  const llama = loadTokenizer(vocabFile({ ...spec, pre: "llama-bpe" }));
  const qwen = loadTokenizer(vocabFile({ ...spec, pre: "qwen2" }));
  assertEquals(texts(llama, llama.encode("12345")), ["123", "45"]);
  assertEquals(texts(qwen, qwen.encode("12345")), ["1", "2", "3", "4", "5"]);
});

Deno.test("add_bos follows the file, defaulting to the pre-tokenizer's (true for llama-bpe)", () => {
  const extra: [string, number][] = [["<|begin_of_text|>", CONTROL]];
  const bos = { "tokenizer.ggml.bos_token_id": Kv.u32(BASE.length) };
  const llama = loadTokenizer(vocabFile({ pre: "llama-bpe", extra, meta: bos }));
  assertEquals(llama.encode("a", { addSpecial: true }), [BASE.length, BASE.indexOf("a")]);
  assertEquals(llama.encode("a"), [BASE.indexOf("a")]);
  const off = loadTokenizer(vocabFile({
    pre: "llama-bpe",
    extra,
    meta: { ...bos, "tokenizer.ggml.add_bos_token": Kv.bool(false) },
  }));
  assertEquals(off.encode("a", { addSpecial: true }), [BASE.indexOf("a")]);
  // With skipSpecial the added BOS goes; without, it renders.
  assertEquals(llama.decode([BASE.length, BASE.indexOf("a")], { skipSpecial: true }), "a");
  assertEquals(llama.decode([BASE.length, BASE.indexOf("a")]), "<|begin_of_text|>a");
});

Deno.test("llama-bpe cleans spaces before punctuation when decoding, qwen2 does not", () => {
  const llama = loadTokenizer(vocabFile({ pre: "llama-bpe" }));
  const qwen = loadTokenizer(vocabFile({ pre: "qwen2" }));
  const text = "Hi ! it 's x ' y 't";
  assertEquals(llama.decode(llama.encode(text)), "Hi! it's x'y 't");
  assertEquals(qwen.decode(qwen.encode(text)), text);
});

Deno.test("user-defined tokens always match, control tokens only with parseSpecial", () => {
  const tok = loadTokenizer(vocabFile({
    extra: [["<ctl>", CONTROL], ["<ud>", USER_DEFINED], ["<ud><ud>", USER_DEFINED]],
  }));
  const ctl = tok.tokenId("<ctl>")!;
  const ud = tok.tokenId("<ud>")!;
  const udud = tok.tokenId("<ud><ud>")!;
  assertEquals(tok.encode("<ud>"), [ud]);
  assertEquals(tok.encode("<ctl>").includes(ctl), false);
  assertEquals(tok.encode("x<ctl>y", { parseSpecial: true }), [
    tok.tokenId("x")!,
    ctl,
    tok.tokenId("y")!,
  ]);
  // The longest special token is cut out first.
  assertEquals(tok.encode("<ud><ud><ud>"), [udud, ud]);
});

Deno.test("</s> becomes a control token and the end-of-generation set follows llama.cpp", () => {
  const extra: [string, number][] = [
    ["</s>", NORMAL],
    ["<|endoftext|>", CONTROL],
    ["<|im_end|>", CONTROL],
    ["<|fim_pad|>", CONTROL],
    ["<|repo_name|>", CONTROL],
    ["<|file_sep|>", CONTROL],
    ["<|im_start|>", CONTROL],
  ];
  const tok = loadTokenizer(vocabFile({
    extra,
    meta: { "tokenizer.ggml.eos_token_id": Kv.u32(BASE.length + 2) },
  }));
  const ids = (names: string[]): number[] =>
    names.map((t) => tok.tokenId(t)!).sort((a, b) => a - b);
  assertEquals(
    [...tok.eogIds].sort((a, b) => a - b),
    ids(["</s>", "<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]),
  );
  assertEquals(tok.isEog(tok.tokenId("<|im_start|>")!), false);
  assertEquals(tok.encode("</s>", { parseSpecial: true }), [tok.tokenId("</s>")!]);
  assertEquals(tok.encode("</s>").length, 4);
});

Deno.test("decode renders control tokens unless skipped, unused tokens never", () => {
  const tok = loadTokenizer(vocabFile({
    extra: [["<|im_end|>", CONTROL], ["<think>", USER_DEFINED], ["[PAD0]", UNUSED]],
  }));
  const ids = [
    tok.tokenId("<think>")!,
    tok.tokenId("h")!,
    tok.tokenId("[PAD0]")!,
    tok.tokenId("<|im_end|>")!,
  ];
  assertEquals(tok.decode(ids), "<think>h<|im_end|>");
  assertEquals(tok.decode(ids, { skipSpecial: true }), "<think>h");
});

Deno.test("bytes without a token of their own fall back to nothing, as in llama.cpp", () => {
  // No token for the UTF-8 bytes of "é": llama.cpp drops them (no byte tokens to use).
  const tok = loadTokenizer(vocabFile({}));
  assertEquals(texts(tok, tok.encode("aéb")), ["a", "b"]);
});

Deno.test("a token id outside the vocabulary is a TokenizerError", () => {
  const tok = loadTokenizer(vocabFile({}));
  const err = assertThrows(() => tok.decode([0, tok.size]), TokenizerError);
  assertEquals(err.code, "tokenizer_bad_token_id");
  assertEquals(
    assertThrows(() => tok.tokenBytes(-1, true), TokenizerError).code,
    "tokenizer_bad_token_id",
  );
  assertEquals(
    assertThrows(() => tok.tokenBytes(1.5, true), TokenizerError).code,
    "tokenizer_bad_token_id",
  );
});

Deno.test("vocabularies neuron cannot tokenize exactly are refused with a reason", () => {
  const unsupported = (spec: VocabSpec): string =>
    assertThrows(() => loadTokenizer(vocabFile(spec)), TokenizerError).code;
  assertEquals(unsupported({ model: "t5" }), "tokenizer_unsupported");
  assertEquals(unsupported({ pre: "gpt-4o" }), "tokenizer_unsupported");
  assertEquals(unsupported({ extra: [["a", NORMAL]] }), "tokenizer_bad_vocab");
  const short = vocabFile({
    meta: { "tokenizer.ggml.token_type": Kv.array(GgufValueType.INT32, new Int32Array(3)) },
  });
  assertEquals(
    assertThrows(() => loadTokenizer(short), TokenizerError).code,
    "tokenizer_bad_vocab",
  );
});

Deno.test("the incremental detokenizer holds a character until its last byte", () => {
  // "é" = C3 A9; byte-level characters: C3 -> "Ã", A9 -> "©".
  const tok = loadTokenizer(vocabFile({ extra: [["Ã", NORMAL], ["©", NORMAL]] }));
  const detok = new IncrementalDetokenizer(tok);
  assertEquals(detok.push(tok.tokenId("a")!), "a");
  assertEquals(detok.push(tok.tokenId("Ã")!), "");
  assertEquals(detok.push(tok.tokenId("©")!), "é");
  assertEquals(detok.push(tok.tokenId("Ã")!), "");
  assertEquals(detok.finish(), "\ufffd");
  assertEquals(detok.push(tok.tokenId("b")!), "b", "usable again after finish");
  assert(tok.tokenBytes(tok.tokenId("Ã")!, false).length === 1);
});

Deno.test("utf8Length counts what TextEncoder writes", () => {
  for (const s of ["", "abc", "ñ", "日本", "🙂x", "\ud800", "a\udc00b", "\ud83d"]) {
    assertEquals(utf8Length(s), new TextEncoder().encode(s).length, JSON.stringify(s));
  }
});
