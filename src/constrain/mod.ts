/**
 * Structured output: grammars (GBNF), JSON schemas and forced tool calls compiled into a
 * byte-level automaton, and per sequence a token filter the engine applies before sampling.
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
