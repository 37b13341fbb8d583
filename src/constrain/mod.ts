/**
 * Structured output: grammars (GBNF), JSON schemas and forced tool calls compiled into a
 * byte-level automaton, and per sequence a token filter the engine applies before sampling.
 *
 * Why our own engine rather than xgrammar compiled to WebAssembly (npm:@mlc-ai/web-xgrammar
 * 0.1.27), measured on the same 2-core machine, Qwen3's 151,936 tokens, one object schema:
 * xgrammar took 240-310 ms to take the vocabulary and 320-460 ms to compile the schema,
 * then 12-24 µs per token at the median but 84-330 µs on average with 1-16 ms outliers;
 * its package is a UMD bundle marked as an ES module that Deno cannot import as published,
 * its API is asynchronous, and its errors are strings. Ours compiles a schema in ~20 ms
 * (states and masks are computed lazily, on first use, then kept), costs ~40 µs per token
 * at the median once a state's mask is known (`deno task bench:constrain`), matches
 * llama.cpp's GBNF exactly (tests/constrain/llama_grammar_test.ts), and refuses what it
 * cannot enforce with typed errors that say where. Its weak spot is a state met for the
 * first time: one walk of the vocabulary trie (in C, kernels/cpu/token_mask.c), ~1-3 ms.
 */
export { ConstraintError, type ConstraintErrorCode } from "./errors.ts";
export { addGbnf, parseGbnf } from "./gbnf.ts";
export { type Grammar, GrammarBuilder } from "./grammar.ts";
export { ByteAutomaton, DEAD } from "./automaton.ts";
export { jsonObjectGrammar, jsonSchemaGrammar } from "./json_schema.ts";
export { gbnfLiteral } from "./gbnf_text.ts";
export {
  checkConstraint,
  type ConstraintFields,
  type GrammarPart,
  joinParts,
  type OutputConstraint,
  type TextConstraint,
  textGrammarPart,
  toolArgumentsPart,
  type ToolConstraint,
  type ToolSpec,
} from "./spec.ts";
export { buildTokenTrie, type TokenTrie } from "./vocab_trie.ts";
export { type TokenMask, TokenMasks } from "./token_masks.ts";
export { ConstraintCompiler } from "./compiler.ts";
export { GrammarMatcher, type ReasoningTokens } from "./matcher.ts";
