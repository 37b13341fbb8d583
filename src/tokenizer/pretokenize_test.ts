import { assertEquals } from "../../tests/support/assert.ts";
import { splitWords } from "./pretokenize.ts";
import { toCodepoints } from "./unicode.ts";

function split(text: string, kind: "qwen2" | "llama3"): string[] {
  const { cps, offsets } = toCodepoints(text);
  const ends: number[] = [];
  splitWords(cps, kind === "qwen2" ? 1 : 3, ends);
  const words: string[] = [];
  let start = 0;
  for (const end of ends) {
    words.push(text.slice(offsets[start], offsets[end]));
    start = end;
  }
  return words;
}

Deno.test("qwen2 splits words with their leading space and digits one by one", () => {
  assertEquals(split("Hello world", "qwen2"), ["Hello", " world"]);
  assertEquals(split("abc123def 2024", "qwen2"), [
    "abc",
    "1",
    "2",
    "3",
    "def",
    " ",
    "2",
    "0",
    "2",
    "4",
  ]);
  assertEquals(split("hello!!! ...", "qwen2"), ["hello", "!!!", " ..."]);
});

Deno.test("contractions match case-insensitively, other apostrophes are punctuation", () => {
  assertEquals(split("I'M SURE you're", "qwen2"), ["I", "'M", " SURE", " you", "'re"]);
  assertEquals(split("don't x'", "qwen2"), ["don", "'t", " x", "'"]);
  assertEquals(split("'LL'Ve", "llama3"), ["'LL", "'Ve"]);
});

Deno.test("whitespace runs leave their last space to the next word", () => {
  assertEquals(split("a  b", "qwen2"), ["a", " ", " b"]);
  assertEquals(split("  \n  x", "qwen2"), ["  \n", " ", " x"]);
  assertEquals(split("a\r\nb", "qwen2"), ["a", "\r\n", "b"]);
  assertEquals(split("a.\n\nb", "qwen2"), ["a", ".\n\n", "b"]);
  assertEquals(split("end ", "qwen2"), ["end", " "]);
  assertEquals(split("end   ", "qwen2"), ["end", "   "]);
  assertEquals(split("\tfoo", "qwen2"), ["\tfoo"]);
});

Deno.test("whitespace is Unicode White_Space: U+0085 is, U+FEFF is not", () => {
  assertEquals(split("a\u0085\u0085b", "qwen2"), ["a", "\u0085", "\u0085b"]);
  assertEquals(split("a\ufeff\ufeffb", "qwen2"), ["a", "\ufeff\ufeff", "b"]);
  assertEquals(split("x\u00a0y", "qwen2"), ["x", "\u00a0y"]);
});

Deno.test("punctuation joins the letters after it", () => {
  assertEquals(split("你好，世界", "qwen2"), ["你好", "，世界"]);
  assertEquals(split("(a) [b]", "qwen2"), ["(a", ")", " [", "b", "]"]);
});

Deno.test("llama3 (llama-bpe) groups digits by three", () => {
  assertEquals(split("I'VE 1234567 words", "llama3"), [
    "I",
    "'VE",
    " ",
    "123",
    "456",
    "7",
    " words",
  ]);
  assertEquals(split("x12", "llama3"), ["x", "12"]);
  assertEquals(split("٣٤٥٦", "llama3"), ["٣٤٥", "٦"]);
});

Deno.test("letters are Unicode 15.1's, like llama.cpp's tables, not the engine's newer ones", () => {
  // U+1C89 (CYRILLIC CAPITAL LETTER TJE) is a letter since Unicode 16 only.
  assertEquals(split("a\u1c89b", "qwen2"), ["a", "\u1c89b"]);
  assertEquals(split("a\u1c80b", "qwen2"), ["a\u1c80b"]);
  // CJK Extension I (Unicode 15.1) is letters; Roman numerals and superscripts are numbers.
  assertEquals(split("\u{2ebf0}\u{2ebf1}", "qwen2"), ["\u{2ebf0}\u{2ebf1}"]);
  assertEquals(split("Ⅻ²", "llama3"), ["Ⅻ²"]);
});

Deno.test("astral characters and lone surrogates are one code point each", () => {
  assertEquals(split("a😀😀b", "qwen2"), ["a", "😀😀", "b"]);
  assertEquals(split("a 😀b", "qwen2"), ["a", " 😀", "b"]);
  assertEquals(split("a\ud800b", "qwen2"), ["a", "\ud800b"]);
});
