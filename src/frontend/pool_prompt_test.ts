/**
 * A pooling request's inputs as token ids, as llama-server makes them: texts with special
 * tokens parsed and BOS/EOS added where the vocabulary adds them, ids as they are, a
 * reranker's pair in its rerank prompt (placeholders replaced one pass each, the texts
 * taken literally) or, without one, `[BOS] query [EOS] document [EOS]`.
 */

import { assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { writeVariant } from "../../tests/support/gguf_variant.ts";
import { Kv, openGguf } from "../gguf/mod.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/mod.ts";
import { addedSpecials } from "./front_end.ts";
import { poolPromptIds } from "./pool_prompt.ts";

async function withTokenizer(
  bosEos: boolean,
  fn: (tokenizer: Tokenizer) => void,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    const path = writeVariant(fixture("qwen3-vocab.gguf"), `${dir}/v.gguf`, (kv) => {
      kv.set("tokenizer.ggml.add_bos_token", Kv.bool(bosEos));
      kv.set("tokenizer.ggml.add_eos_token", Kv.bool(bosEos));
    });
    const file = openGguf(path);
    try {
      fn(loadTokenizer(file));
    } finally {
      file.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("pool prompts: texts, ids, rerank prompts and the plain pair format", async () => {
  await withTokenizer(true, (tok) => {
    const added = addedSpecials(tok);
    const [bos, eos] = [tok.bosId!, tok.eosId!];
    const ids = (text: string) => tok.encode(text, { parseSpecial: true });
    const text = poolPromptIds(tok, { kind: "text", text: "hi <|im_end|>" }, null, added);
    assertEquals(text, [bos, ...ids("hi <|im_end|>"), eos]);
    assertEquals(poolPromptIds(tok, { kind: "tokens", ids: [5, 6] }, null, added), [5, 6]);
    const pair = { kind: "pair" as const, query: "q $& {document}", document: "d" };
    assertEquals(poolPromptIds(tok, pair, null, added), [
      bos,
      ...tok.encode("q $& {document}"),
      eos,
      ...tok.encode("d"),
      eos,
    ]);
    // As llama-server's string_replace_all: {query} first, then every {document}.
    assertEquals(
      poolPromptIds(tok, pair, "<|im_start|>Q:{query} D:{document}", added),
      ids("<|im_start|>Q:q $& d D:d"),
    );
  });
  await withTokenizer(false, (tok) => {
    const pair = { kind: "pair" as const, query: "a", document: "b" };
    assertEquals(poolPromptIds(tok, pair, null, addedSpecials(tok)), [
      ...tok.encode("a"),
      ...tok.encode("b"),
    ]);
  });
});
