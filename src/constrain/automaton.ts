/**
 * The grammar's pushdown automaton, determinized lazily into states over bytes. A parse
 * configuration is a set of stacks (as in llama.cpp's grammar matcher), each a chain of
 * element positions whose top is a byte set; a finished stack is the empty one. Stacks are
 * hash-consed, a configuration is interned as a state, and each state's transition on a
 * byte is computed once, when first asked, then read from a table: walking a token costs
 * one table read per byte however ambiguous the grammar. Repetitions are right-recursive
 * with the tail call dropped (as llama.cpp drops it), so a loop comes back to the same
 * state instead of growing the stack. States, stacks per state and stack nodes are bounded:
 * a grammar past them is refused with `grammar_too_complex` rather than eating the node.
 */

import { ConstraintError } from "./errors.ts";
import { BYTES, END, type Grammar, hasByte } from "./grammar.ts";

export const DEAD = -1;
const UNKNOWN = -2;

export interface AutomatonLimits {
  states: number;
  stacksPerState: number;
  nodes: number;
}

export const DEFAULT_LIMITS: AutomatonLimits = {
  states: 50_000,
  stacksPerState: 512,
  nodes: 2_000_000,
};

export class ByteAutomaton {
  readonly grammar: Grammar;
  /**
   * `table[state * 256 + byte]`: the next state, DEAD, or not yet computed (below DEAD).
   * One flat table, grown by doubling, so a walk reads it with one index.
   */
  table = new Int32Array(256 * 64).fill(UNKNOWN);
  readonly #limits: AutomatonLimits;
  readonly #stride: number;
  // Stack node n is (position, rest of the stack); node 0 is the empty stack.
  readonly #nodePos: number[] = [0];
  readonly #nodeNext: number[] = [0];
  readonly #nodeIds = new Map<number, number>();
  readonly #stacks: Int32Array[] = [];
  /** States by a hash of their stacks. */
  readonly #stateIds = new Map<number, number[]>();
  readonly #setBytes: Uint8Array[] = [];
  readonly #advanced: Int32Array[] = [];
  readonly start: number;

  constructor(grammar: Grammar, limits: AutomatonLimits = DEFAULT_LIMITS) {
    this.grammar = grammar;
    this.#limits = limits;
    this.#stride = grammar.kind.length + 1;
    const out = new Set<number>();
    const seen = new Set<number>();
    for (const alt of grammar.alternatives[grammar.root]) this.#expand(alt, 0, out, seen);
    this.start = this.#intern(Int32Array.from(out).sort());
  }

  get stateCount(): number {
    return this.#stacks.length;
  }

  /**
   * Computes the transitions of the first `states` states, breadth first from the start,
   * ahead of use: at compile time rather than while a sequence waits for its mask. The
   * work is bounded by the parse stacks followed too (`stacks`), so an ambiguous grammar
   * stops early. A state the grammar's bounds refuse stops it quietly; meeting it later
   * refuses as before.
   */
  expandAhead(states: number, stacks: number): void {
    let followed = 0;
    try {
      for (let s = 0; s < this.stateCount && s < states && followed < stacks; s++) {
        this.computeRow(s);
        followed += this.#stacks[s].length;
      }
    } catch (err) {
      if (!(err instanceof ConstraintError)) throw err;
    }
  }

  /** The state after `byte`, or DEAD. */
  next(state: number, byte: number): number {
    const t = this.table[(state << 8) | byte];
    return t === UNKNOWN ? this.compute(state, byte) : t;
  }

  /** The state after `bytes`, or DEAD. */
  walk(state: number, bytes: Uint8Array): number {
    let s = state;
    for (let i = 0; i < bytes.length && s !== DEAD; i++) s = this.next(s, bytes[i]);
    return s;
  }

  /** The input so far is a whole sentence of the grammar. */
  accepting(state: number): boolean {
    return this.#stacks[state][0] === 0;
  }

  /** A whole sentence that no byte can extend. */
  finished(state: number): boolean {
    const stacks = this.#stacks[state];
    return stacks.length === 1 && stacks[0] === 0;
  }

  /** Fills in `table[state * 256 + byte]`. */
  compute(state: number, byte: number): number {
    const { arg, byteSets } = this.grammar;
    const out = new Set<number>();
    const seen = new Set<number>();
    for (const id of this.#stacks[state]) {
      if (id === 0) continue;
      const pos = this.#nodePos[id];
      if (hasByte(byteSets[arg[pos]], byte)) this.#expand(pos + 1, this.#nodeNext[id], out, seen);
    }
    const next = out.size === 0 ? DEAD : this.#intern(Int32Array.from(out).sort());
    this.table[(state << 8) | byte] = next;
    return next;
  }

  /**
   * Fills in every transition of `state` not computed yet: a walk that meets a new state
   * mostly needs many of its bytes. Bytes read by the same stacks lead to the same state,
   * so the bytes are first split into such classes (inside a JSON string: plain
   * characters, the quote, the backslash, each kind of UTF-8 lead byte...) and each class
   * is expanded and interned once, not each of its bytes.
   */
  computeRow(state: number): void {
    const { arg } = this.grammar;
    const stacks = this.#stacks[state];
    // Stacks whose tops read the same byte set stay together: split by sets, not stacks.
    const bySet = new Map<number, number[]>();
    for (let i = 0; i < stacks.length; i++) {
      if (stacks[i] === 0) continue;
      const set = arg[this.#nodePos[stacks[i]]];
      const group = bySet.get(set);
      if (group === undefined) bySet.set(set, [i]);
      else group.push(i);
    }
    // classOf[b]: bytes read by the same stacks so far share a class; 0 = none.
    const classOf = new Int32Array(256);
    const members: number[][] = [[]];
    // splitTo[c]: the class that class c's bytes in the current set move to, once made.
    const splitTo: number[] = [];
    for (const [set, group] of bySet) {
      const first = members.length;
      for (const b of this.#bytesOf(set)) {
        const c = classOf[b];
        if (!(splitTo[c] >= first)) {
          splitTo[c] = members.length;
          members.push(members[c].concat(group));
        }
        classOf[b] = splitTo[c];
      }
    }
    const nextOf = new Int32Array(members.length).fill(UNKNOWN);
    const row = state << 8;
    for (let b = 0; b < 256; b++) {
      if (this.table[row | b] !== UNKNOWN) continue;
      const c = classOf[b];
      if (nextOf[c] === UNKNOWN) nextOf[c] = this.#follow(stacks, members[c]);
      // Interning may grow (replace) the table: index it afresh.
      this.table[row | b] = nextOf[c];
    }
  }

  /** The bytes of byte set `set`, listed once per set. */
  #bytesOf(set: number): Uint8Array {
    let bytes = this.#setBytes[set];
    if (bytes === undefined) {
      const words = this.grammar.byteSets[set];
      const list: number[] = [];
      for (let w = 0; w < 8; w++) {
        for (let word = words[w]; word !== 0; word &= word - 1) {
          list.push((w << 5) | (31 - Math.clz32(word & -word)));
        }
      }
      bytes = this.#setBytes[set] = Uint8Array.from(list);
    }
    return bytes;
  }

  /** The state after a byte read by exactly the stacks `which` of `stacks`, or DEAD. */
  #follow(stacks: Int32Array, which: readonly number[]): number {
    if (which.length === 1) {
      const out = this.#advance(stacks[which[0]]);
      return out.length === 0 ? DEAD : this.#intern(out);
    }
    const out = new Set<number>();
    for (const i of which) for (const t of this.#advance(stacks[i])) out.add(t);
    if (out.size > this.#limits.stacksPerState) this.#tooComplex("parse stacks at once");
    return out.size === 0 ? DEAD : this.#intern(Int32Array.from(out).sort());
  }

  /**
   * The stacks stack `node` becomes once its top byte is read (sorted), found once per
   * stack node: the same stacks come back in many states (a string's content, whatever
   * its count), and in several byte classes of one state.
   */
  #advance(node: number): Int32Array {
    let out = this.#advanced[node];
    if (out === undefined) {
      const set = new Set<number>();
      this.#expand(this.#nodePos[node] + 1, this.#nodeNext[node], set, new Set());
      out = this.#advanced[node] = Int32Array.from(set).sort();
    }
    return out;
  }

  /**
   * Every stack that position `pos` (over the stack `next`) stands for once rules are
   * entered and finished alternatives popped: tops that read a byte, or the empty stack.
   */
  #expand(pos: number, next: number, out: Set<number>, seen: Set<number>): void {
    const { kind, arg, alternatives } = this.grammar;
    const work = [pos, next];
    while (work.length > 0) {
      const n = work.pop()!;
      const p = work.pop()!;
      const key = p + n * this.#stride;
      if (seen.has(key)) continue;
      seen.add(key);
      const k = kind[p];
      if (k === END) {
        if (n === 0) out.add(0);
        else work.push(this.#nodePos[n], this.#nodeNext[n]);
      } else if (k === BYTES) {
        out.add(this.#node(p, n));
        if (out.size > this.#limits.stacksPerState) this.#tooComplex("parse stacks at once");
      } else {
        const cont = kind[p + 1] === END ? n : this.#node(p + 1, n);
        for (const alt of alternatives[arg[p]]) work.push(alt, cont);
      }
    }
  }

  #node(pos: number, next: number): number {
    const key = pos + next * this.#stride;
    let id = this.#nodeIds.get(key);
    if (id === undefined) {
      id = this.#nodePos.length;
      if (id >= this.#limits.nodes) this.#tooComplex("stack nodes");
      this.#nodePos.push(pos);
      this.#nodeNext.push(next);
      this.#nodeIds.set(key, id);
    }
    return id;
  }

  /** The state of the stacks `sorted` (sorted, distinct; kept, not copied). */
  #intern(sorted: Int32Array): number {
    let hash = sorted.length;
    for (let i = 0; i < sorted.length; i++) hash = Math.imul(hash ^ sorted[i], 0x9e3779b1);
    let bucket = this.#stateIds.get(hash);
    if (bucket === undefined) this.#stateIds.set(hash, bucket = []);
    for (const id of bucket) if (sameStacks(this.#stacks[id], sorted)) return id;
    const id = this.#stacks.length;
    if (id >= this.#limits.states) this.#tooComplex("parser states");
    this.#stacks.push(sorted);
    if ((id + 1) << 8 > this.table.length) {
      const grown = new Int32Array(this.table.length * 2).fill(UNKNOWN);
      grown.set(this.table);
      this.table = grown;
    }
    bucket.push(id);
    return id;
  }

  #tooComplex(what: string): never {
    throw new ConstraintError(
      "grammar_too_complex",
      `the grammar needs more ${what} than the node allows; make it less ambiguous or smaller`,
    );
  }
}

function sameStacks(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
