/**
 * The token ids of a pooling request's input, as llama-server makes them: a text to embed
 * is tokenized with special tokens parsed and the vocabulary's BOS/EOS added (so
 * Qwen3-Embedding's inputs end with `<|endoftext|>`); ids are taken as they are; a
 * reranker's query and document go into its rerank prompt (`{query}`, `{document}`), or
 * without one into `[BOS] query [EOS] document [EOS]` (the tokens the vocabulary adds).
 */

import type { AddedSpecials } from "../chat/mod.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { PoolInput } from "./events.ts";

export function poolPromptIds(
  tokenizer: Tokenizer,
  input: PoolInput,
  rerankPrompt: string | null,
  added: AddedSpecials,
): number[] {
  switch (input.kind) {
    case "tokens":
      return input.ids;
    case "text":
      return tokenizer.encode(input.text, { parseSpecial: true, addSpecial: true });
    case "pair": {
      if (rerankPrompt !== null) {
        // One pass per placeholder, as llama-server's string_replace_all makes it; the
        // texts are inserted as they are ("$&" in a query is not a pattern).
        const text = rerankPrompt.replaceAll("{query}", () => input.query)
          .replaceAll("{document}", () => input.document);
        return tokenizer.encode(text, { parseSpecial: true });
      }
      const bos = added.addBos && tokenizer.bosId !== null ? [tokenizer.bosId] : [];
      const eos = added.addEos && tokenizer.eosId !== null ? [tokenizer.eosId] : [];
      return [
        ...bos,
        ...tokenizer.encode(input.query),
        ...eos,
        ...tokenizer.encode(input.document),
        ...eos,
      ];
    }
  }
}
