/**
 * Structured output: grammars (GBNF), JSON schemas and forced tool calls compiled into a
 * byte-level automaton, and per sequence a token filter the engine applies before sampling.
 *
 * Why our own engine rather than xgrammar compiled to WebAssembly (npm:@mlc-ai/web-xgrammar
 * 0.1.27), measured on the same 2-core machine, Qwen3's 151,936 tokens, one object schema:
 * xgrammar took 240-310 ms to take the vocabulary and 320-460 ms to compile the schema,
 * then 12-24 µs per token at the median but 84-330 µs on average with 1-16 ms outliers;
 * its package is a UMD bundle marked as an ES module that Deno cannot import as published,
 * its API is asynchronous, and its errors are strings. Ours takes the vocabulary in
 * ~0.6-0.9 s (its trie and plain-text slices, once per model), compiles a schema in ~30 ms
 * (the automaton's first 4,096 states; masks are computed on first use, then kept), and
 * costs ~45 µs per token on average with the sampler's copy of the row included (~30 µs
 * without it), p99 ~0.3 ms, the first sequence of a new schema ~80 µs on average
 * (`deno task bench:constrain`). It matches llama.cpp's GBNF exactly
 * (tests/constrain/llama_grammar_test.ts) and refuses what it cannot enforce with typed
 * errors that say where. A state met for the first time costs one walk of what plain-text
 * slices leave of the vocabulary trie (text_slices.ts; in C, kernels/cpu/token_mask.c).
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
