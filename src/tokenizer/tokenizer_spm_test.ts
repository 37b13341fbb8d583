/**
 * SentencePiece-style vocabularies (`tokenizer.ggml.model = "llama"`: Llama 2, Mistral,
 * Gemma) on a hand-made vocabulary; every expectation here is what llama.cpp's
 * llama_tokenize / llama_detokenize return for the same file.
 */
import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/support/assert.ts";
import {
  SPM_FIRST_PIECE,
  type SpmPiece,
  spmVocabBytes,
  TOKEN_TYPE,
} from "../../tests/support/tiny_vocab.ts";
import { GgufValueType, Kv, parseGgufBytes } from "../gguf/mod.ts";
import type { GgufKv } from "../gguf/mod.ts";
import { IncrementalDetokenizer } from "./detokenizer.ts";
import { TokenizerError } from "./errors.ts";
import { loadTokenizer, type Tokenizer } from "./tokenizer.ts";

const PIECES: SpmPiece[] = [
  { text: "▁", score: -9 },
  ...[..."helowrd"].map((text) => ({ text, score: -9 })),
  { text: "▁h", score: -3 },
  { text: "he", score: -2 },
  { text: "ll", score: -1 },
  { text: "llo", score: -4 },
  { text: "hello", score: -5 },
  { text: "▁he", score: -6 },
  { text: "▁w", score: -7 },
  { text: "▁wor", score: -8 },
  { text: "or", score: -2.5 },
  { text: "<u>", type: TOKEN_TYPE.USER_DEFINED },
  { text: "▁<c>", type: TOKEN_TYPE.CONTROL },
];

function spm(meta: Record<string, GgufKv> = {}, pieces = PIECES): Tokenizer {
  return loadTokenizer(parseGgufBytes(spmVocabBytes({ pieces, meta })));
}

const BOS = 1;
const EOS = 2;
const byte = (b: number): number => 3 + b;

function texts(tok: Tokenizer, ids: number[]): string[] {
  return ids.map((id) => tok.tokenText(id));
}

Deno.test("spm: spaces become ▁ and a space starts the text", () => {
  const tok = spm();
  assertEquals(texts(tok, tok.encode("hello")), ["▁", "hello"]);
  assertEquals(texts(tok, tok.encode("hello world")), ["▁", "hello", "▁wor", "l", "d"]);
  assertEquals(texts(tok, tok.encode(" hello")), ["▁", "▁", "hello"]);
});

Deno.test("spm: every piece after a special token starts with a space too", () => {
  const tok = spm();
  const ids = tok.encode("hello<u>hello▁<c>he", { parseSpecial: true });
  assertEquals(texts(tok, ids), ["▁", "hello", "<u>", "▁", "hello", "▁<c>", "▁he"]);
  // Control tokens are text unless parsed; user-defined ones always match.
  assertEquals(tok.encode("<u>▁<c>"), [
    tok.tokenId("<u>")!,
    tok.tokenId("▁")!,
    tok.tokenId("▁")!,
    byte(0x3c),
    byte(0x63),
    byte(0x3e),
  ]);
});

Deno.test("spm: add_space_prefix false (Gemma) adds no space", () => {
  const tok = spm({ "tokenizer.ggml.add_space_prefix": Kv.bool(false) });
  assertEquals(texts(tok, tok.encode("hello")), ["hello"]);
  assertEquals(texts(tok, tok.encode("he<u>he")), ["he", "<u>", "he"]);
  assertEquals(tok.decode(tok.encode(" hello")), " hello");
});

Deno.test("spm: characters without a token fall back to byte tokens", () => {
  const tok = spm();
  assertEquals(tok.encode("hé"), [tok.tokenId("▁h")!, byte(0xc3), byte(0xa9)]);
  assertEquals(tok.decode(tok.encode("hé 🙂")), "hé 🙂");
  // A lone surrogate is what UTF-8 would make of it: U+FFFD.
  assertEquals(tok.encode("\ud800"), [tok.tokenId("▁")!, byte(0xef), byte(0xbf), byte(0xbd)]);
});

Deno.test("spm: BOS is added by default, EOS only when the file asks", () => {
  const tok = spm();
  assertEquals(tok.encode("he", { addSpecial: true }), [BOS, tok.tokenId("▁he")!]);
  assertEquals(tok.encode("", { addSpecial: true }), [BOS]);
  const noBos = spm({ "tokenizer.ggml.add_bos_token": Kv.bool(false) });
  assertEquals(noBos.encode("he", { addSpecial: true }), [tok.tokenId("▁he")!]);
  const eos = spm({ "tokenizer.ggml.add_eos_token": Kv.bool(true) });
  assertEquals(eos.encode("he", { addSpecial: true }), [BOS, tok.tokenId("▁he")!, EOS]);
});

Deno.test("spm: decoding drops the leading space the encoder added", () => {
  const tok = spm();
  const hello = tok.encode("hello");
  assertEquals(tok.decode(hello), "hello");
  assertEquals(tok.decode([BOS, ...hello]), "<s> hello");
  // llama.cpp: once a BOS is removed, the space after it stays.
  assertEquals(tok.decode([BOS, ...hello], { removeSpecial: true }), " hello");
  assertEquals(tok.decode([BOS, ...hello], { unparseSpecial: false }), " hello");
  assertEquals(tok.decode([BOS, ...hello], { skipSpecial: true }), " hello");
  // Only one space goes, and only from the first piece.
  assertEquals(tok.decode(tok.encode("  he")), "  he");
});

Deno.test("spm: pieces render as llama_token_to_piece does", () => {
  const tok = spm();
  const piece = (text: string, special = true): string =>
    new TextDecoder().decode(tok.tokenBytes(tok.tokenId(text)!, special));
  assertEquals(piece("▁wor"), " wor");
  assertEquals(piece("<0x41>"), "A");
  assertEquals(piece("<u>"), "<u>");
  // Control tokens keep their ▁: only normal tokens have spaces escaped.
  assertEquals(piece("▁<c>"), "▁<c>");
  assertEquals(piece("▁<c>", false), "");
  assertEquals(piece("<unk>"), "<unk>");
  assertEquals(piece("<unk>", false), "");
  // Streaming reassembles a character split over byte tokens.
  const detok = new IncrementalDetokenizer(tok);
  assertEquals([byte(0xc3), byte(0xa9)].map((id) => detok.push(id)).join(""), "é");
});

Deno.test("spm: a vocabulary without byte tokens is refused, naming the byte", () => {
  const err = assertThrows(
    () => loadTokenizer(parseGgufBytes(spmVocabBytes({ pieces: PIECES, noByteTokens: true }))),
    TokenizerError,
  );
  assertEquals(err.code, "tokenizer_bad_vocab");
  assertStringIncludes(err.message, "0x00");
});

Deno.test("spm: scores that are not float32 are refused", () => {
  const scores = Kv.array(GgufValueType.INT32, new Int32Array(SPM_FIRST_PIECE + PIECES.length));
  const err = assertThrows(() => spm({ "tokenizer.ggml.scores": scores }), TokenizerError);
  assertEquals(err.code, "tokenizer_bad_vocab");
});

Deno.test("spm: encodeInSlices pauses and still gives encode's ids", () => {
  const tok = spm();
  const text = "hello world<u>hé wor ld\n🙂 hello".repeat(20);
  const whole = tok.encode(text, { parseSpecial: true, addSpecial: true });
  for (const window of [1, 3, 50]) {
    const slices = tok.encodeInSlices(text, { parseSpecial: true, addSpecial: true }, window);
    let pauses = 0;
    let r = slices.next();
    while (!r.done) {
      pauses++;
      r = slices.next();
    }
    assertEquals(r.value, whole, `window ${window}`);
    assertEquals(pauses > 0, true, `window ${window} paused`);
  }
});
