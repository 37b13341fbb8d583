import { NeuronError } from "../common/errors.ts";

export type ConstraintErrorCode =
  /** A GBNF grammar that does not parse, names an undefined rule or recurses on the left. */
  | "invalid_grammar"
  /** A JSON schema that is not a schema (a keyword of the wrong type, a dangling $ref). */
  | "invalid_schema"
  /** A valid schema using a keyword (or keyword value) the node cannot enforce. */
  | "unsupported_schema"
  /** A grammar past the node's bounds on size or on parser states. */
  | "grammar_too_complex";

/**
 * Why a structured-output constraint was refused, or had to stop: the message says what
 * and where (a grammar's line and column, a schema's JSON pointer).
 */
export class ConstraintError extends NeuronError {
  override readonly code: ConstraintErrorCode;

  constructor(code: ConstraintErrorCode, message: string) {
    super(code, message);
    this.code = code;
  }
}
