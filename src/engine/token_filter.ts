/**
 * A per-sequence constraint on its next token (a grammar, a JSON schema). It sees the
 * sampler's copy of the logits before anything else does, so bias, penalties, temperature
 * and truncation all work on the allowed tokens only. Plain greedy decoding needs no copy:
 * where the filter gives its next token's bitset (`allowed`), the runner's native argmax
 * picks under it, where the logits are.
 */
export interface TokenFilter {
  /**
   * Sets the logit of every token the constraint forbids next to -Infinity; given `from`,
   * `logits` is first its copy (the sampler's, made in the same pass). False when it allows
   * none: the constrained output is complete, and the sequence ends (`stop`).
   */
  restrict(logits: Float32Array, from?: Float32Array): boolean;
  /**
   * Before the step's forward pass: the tokens `restrict` would allow next, exactly, as a
   * bitset over a vocabulary of `vocabSize` (ceil(vocabSize / 32) words; bit i of word
   * i >>> 5: token i), for greedy argmax to pick under where the logits are. Null when it
   * allows none (the sequence then ends through `restrict`) or cannot say (another
   * vocabulary size): the logits are then read back. The array may be shared (with other
   * sequences, other steps): read it only. Absent: always read back.
   */
  allowed?(vocabSize: number): Uint32Array | null;
  /** The sequence took `id` (one `restrict` allowed). */
  accept(id: number): void;
  /**
   * How many of `ids`, each after the ones before it, the constraint would allow from
   * where it stands, changing nothing: a speculative draft ends before the first refused
   * token. Absent: drafts are not cut (a refused token is never sampled, so its
   * verification refuses it).
   */
  admits?(ids: readonly number[]): number;
}
