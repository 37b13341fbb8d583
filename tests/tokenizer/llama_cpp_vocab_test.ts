/**
 * The tokenizer against llama.cpp itself, live, on the real vocabulary of every fixture
 * family: Llama 3 (byte-level BPE, llama-bpe), Mistral (SentencePiece, 32k), Qwen2.5
 * (byte-level BPE, qwen2) and Gemma 3 (SentencePiece, 262k, no space prefix). Every string
 * of golden/tokenizer.json, the family's own control tokens written inside text, and its
 * text and chat prompts (tests/models/family_prompts.ts, rendered by its template) tokenize
 * to llama.cpp's ids with and without special-token parsing, with and without BOS/EOS, and
 * those ids detokenize to llama.cpp's text with special tokens rendered or not, removed or
 * not.
 */

import { assertEquals } from "../support/assert.ts";
import { FAMILIES, familyFixture, fixture } from "../fixtures.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer, type Tokenizer } from "../../src/tokenizer/mod.ts";
import { familyPrompts, promptText } from "../models/family_prompts.ts";

interface Case {
  name: string;
  text: string;
}

const corpus: Case[] = JSON.parse(Deno.readTextFileSync(fixture("golden/tokenizer.json"))).cases;

/**
 * The family's control tokens written inside text: the first and last dozen of those with
 * a name (the chat template's markers), and one placeholder (`<unused0>`, reserved ones).
 */
function specialCases(tok: Tokenizer): Case[] {
  const named: number[] = [];
  const placeholders: number[] = [];
  for (let id = 0; id < tok.size; id++) {
    if (!tok.isControl(id)) continue;
    (/unused|reserved/.test(tok.tokenText(id)) ? placeholders : named).push(id);
  }
  const chosen = [
    ...new Set([...named.slice(0, 12), ...named.slice(-12), ...placeholders.slice(0, 1)]),
  ];
  const texts = chosen.map((id) => tok.tokenText(id));
  return texts.map((s, i) => {
    const next = texts[(i + 1) % texts.length];
    return { name: `control ${s}`, text: `${s}Hi ${s} there${next}\n${next} ${s}${s}  x` };
  });
}

/** About 100 kB of the corpus strings in a fixed order, separated by spaces and newlines. */
function longText(): string {
  let text = "";
  for (let i = 0; text.length < 100_000; i++) {
    text += corpus[(i * 37) % corpus.length].text + (i % 5 === 0 ? "\n" : " ");
  }
  return text;
}

for (const family of FAMILIES) {
  Deno.test(`${family}: the corpus tokenizes and detokenizes as llama.cpp does`, async (t) => {
    const path = await familyFixture(family, "q8_0");
    using ref = await openLlamaModel(path, { vocabOnly: true });
    const file = openGguf(path);
    try {
      const tok = loadTokenizer(file);
      const prompts = familyPrompts(family).map((p) => ({
        name: `prompt ${p.name}`,
        text: promptText(file, p).text,
      }));
      const cases = [...corpus, ...specialCases(tok), ...prompts];
      let compared = 0;
      for (const special of [true, false]) {
        for (const addSpecial of [true, false]) {
          await t.step(`parse special ${special}, add BOS/EOS ${addSpecial}`, () => {
            for (const c of cases) {
              const want = ref.tokenize(c.text, { special, addSpecial });
              assertEquals(tok.encode(c.text, { parseSpecial: special, addSpecial }), want, c.name);
              for (const unparse of [true, false]) {
                for (const remove of [true, false]) {
                  assertEquals(
                    tok.decode(want, { unparseSpecial: unparse, removeSpecial: remove }),
                    ref.detokenize(want, { special: unparse, removeSpecial: remove }),
                    `${c.name}: decode, special ${unparse}, remove ${remove}`,
                  );
                }
              }
              compared++;
            }
          });
        }
      }
      assertEquals(compared, 4 * cases.length);
    } finally {
      file.close();
    }
  });
}

for (const family of FAMILIES) {
  Deno.test(`${family}: a 100 kB text tokenizes as llama.cpp does`, async () => {
    const path = await familyFixture(family, "q8_0");
    using ref = await openLlamaModel(path, { vocabOnly: true });
    const file = openGguf(path);
    try {
      const text = longText();
      const tok = loadTokenizer(file);
      for (const special of [true, false]) {
        const want = ref.tokenize(text, { special, addSpecial: true });
        assertEquals(tok.encode(text, { parseSpecial: special, addSpecial: true }), want);
      }
    } finally {
      file.close();
    }
  });
}
