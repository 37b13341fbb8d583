/**
 * Constraints on a thinking model (the Qwen3 vocabulary and template): with thinking on,
 * the output may open a reasoning block before the constrained answer, and ending inside
 * it is refused; with thinking off (the template closes the block in the prompt), the
 * answer starts constrained at once.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { GREEDY } from "../engine/sampler.ts";
import { openGguf } from "../gguf/mod.ts";
import { FrontEnd } from "./front_end.ts";

const frontEnd = FrontEnd.fromGguf(openGguf(fixture("qwen3-vocab.gguf")));
const tok = frontEnd.tokenizer;
const id = (text: string): number => tok.tokenId(text)!;

async function filterFor(thinking: boolean) {
  const prepared = await frontEnd.prepare({
    id: "r",
    prompt: {
      kind: "messages",
      messages: [{ role: "user", content: "hi" }],
      templateKwargs: { enable_thinking: thinking },
    },
    sampling: GREEDY,
    parseOutput: true,
    constraint: { text: { kind: "json" } },
  }, () => {});
  return prepared.request.filter!;
}

function allows(filter: { restrict(x: Float32Array): boolean }, ...texts: string[]): boolean[] {
  const logits = new Float32Array(tok.size);
  filter.restrict(logits);
  return texts.map((t) => logits[id(t)] !== -Infinity);
}

Deno.test("constraints: thinking on, the answer may follow a reasoning block", async () => {
  const filter = await filterFor(true);
  assertEquals(allows(filter, "<think>", "{", "hello", "<|im_end|>"), [true, true, false, false]);
  filter.accept(id("<think>"));
  assertEquals(allows(filter, "hello", "{", "<|im_end|>"), [true, true, false]);
  filter.accept(id("hello"));
  filter.accept(id("</think>"));
  assertEquals(allows(filter, "{", "hello", "<think>"), [true, false, false]);
});

Deno.test("constraints: thinking off, the answer is constrained from its first token", async () => {
  const filter = await filterFor(false);
  assertEquals(allows(filter, "<think>", "{", "hello"), [false, true, false]);
  filter.accept(id("{"));
  filter.accept(id("}"));
  const end = allows(filter, "<|im_end|>", "{");
  assert(end[0] && !end[1], `${end}`);
});
