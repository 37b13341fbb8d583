/**
 * A context-free grammar over bytes, the form every constraint compiles to (GBNF text,
 * JSON schemas, forced tool calls): rules of alternatives, each a sequence of byte sets and
 * rule references. Character classes become UTF-8 byte sequences (utf8_ranges.ts) when
 * they are built, so matching never decodes. Laid out flat for the matcher: element `p` is
 * `kind[p]` with `arg[p]`, each alternative ends with END.
 */

import { ConstraintError } from "./errors.ts";
import { normalizeRanges, utf8Encode, utf8Sequences } from "./utf8_ranges.ts";

export const END = 0;
export const BYTES = 1;
export const RULE = 2;

/** Elements of all rules together at most: a bound on what one request may ask to build. */
export const MAX_ELEMENTS = 250_000;

export interface Grammar {
  readonly names: readonly string[];
  readonly root: number;
  /** Per rule, the position where each of its alternatives starts. */
  readonly alternatives: readonly Int32Array[];
  readonly kind: Uint8Array;
  /** A byte set's index (BYTES) or a rule's (RULE). */
  readonly arg: Int32Array;
  /** 256-bit sets, 8 words each. */
  readonly byteSets: readonly Uint32Array[];
}

export type Element = { bytes: Uint32Array } | { rule: number };

export function byteSet(ranges: ReadonlyArray<readonly [number, number]>): Uint32Array {
  const set = new Uint32Array(8);
  for (const [lo, hi] of ranges) {
    for (let b = lo; b <= hi; b++) set[b >> 5] |= 1 << (b & 31);
  }
  return set;
}

export function hasByte(set: Uint32Array, b: number): boolean {
  return ((set[b >> 5] >>> (b & 31)) & 1) === 1;
}

/** Builds a grammar rule by rule; `build` checks it as llama.cpp's loader does. */
export class GrammarBuilder {
  readonly #names: string[] = [];
  readonly #ids = new Map<string, number>();
  readonly #defs: Array<Element[][] | undefined> = [];
  /** Where a rule was first referenced, for the message when it is never defined. */
  readonly #firstUse: Array<string | undefined> = [];
  readonly #classes = new Map<string, number>();
  readonly #tails = new Map<string, number>();
  #elements = 0;

  /** The rule called `name`, defined or not yet. */
  ruleId(name: string, where?: string): number {
    let id = this.#ids.get(name);
    if (id === undefined) {
      id = this.#names.length;
      this.#names.push(name);
      this.#ids.set(name, id);
      this.#defs.push(undefined);
      this.#firstUse.push(where);
    }
    return id;
  }

  /** A new rule named after `base`, for a group or repetition. */
  fresh(base: string): number {
    let name = `${base}_${this.#names.length}`;
    while (this.#ids.has(name)) name += "_";
    return this.ruleId(name);
  }

  isDefined(rule: number): boolean {
    return this.#defs[rule] !== undefined;
  }

  /** Sets a rule's alternatives; a later definition replaces an earlier one, as in llama.cpp. */
  define(rule: number, alternatives: Element[][]): void {
    const before = this.#defs[rule]?.reduce((n, a) => n + a.length + 1, 0) ?? 0;
    this.#elements += alternatives.reduce((n, a) => n + a.length + 1, 0) - before;
    if (this.#elements > MAX_ELEMENTS) {
      throw new ConstraintError(
        "grammar_too_complex",
        `the grammar grows past ${MAX_ELEMENTS} elements; simplify it (fewer or smaller repetitions)`,
      );
    }
    this.#defs[rule] = alternatives;
  }

  /** The bytes of a literal string, one element per byte. */
  literal(text: string): Element[] {
    const out: Element[] = [];
    for (const ch of text) {
      for (const b of utf8Encode(ch.codePointAt(0)!)) out.push({ bytes: byteSet([[b, b]]) });
    }
    return out;
  }

  /** One character of a class (code-point ranges, maybe negated), as an element. */
  characterClass(ranges: ReadonlyArray<readonly [number, number]>, negated: boolean): Element {
    const cps = normalizeRanges(ranges, negated);
    if (cps.length === 0) {
      throw new ConstraintError("invalid_grammar", "a character class matches no character");
    }
    if (cps.at(-1)![1] < 0x80) return { bytes: byteSet(cps) };
    const key = cps.map(([a, b]) => `${a}-${b}`).join(",");
    const known = this.#classes.get(key);
    if (known !== undefined) return { rule: known };
    // Sequences that end alike share their end: one alternative per distinct tail, whose
    // lead bytes are a set, and the tail a rule called last (a tail call, so no return
    // position is pushed). After a lead byte the parse is then in one of a few states
    // whatever the lead (7 for all of Unicode, not 18), each a state the automaton
    // meets again for every character of a string.
    const single: Array<[number, number]> = [];
    const leadsByTail = new Map<
      string,
      { tail: Array<[number, number]>; leads: Array<[number, number]> }
    >();
    for (const [lo, hi] of cps) {
      for (const seq of utf8Sequences(lo, hi)) {
        if (seq.length === 1) {
          single.push(seq[0]);
          continue;
        }
        const tail = seq.slice(1);
        const tailKey = JSON.stringify(tail);
        const group = leadsByTail.get(tailKey);
        if (group === undefined) leadsByTail.set(tailKey, { tail, leads: [seq[0]] });
        else group.leads.push(seq[0]);
      }
    }
    const multi = [...leadsByTail.values()].map(({ tail, leads }): Element[] => [
      { bytes: byteSet(leads) },
      { rule: this.#tail(tail) },
    ]);
    const rule = this.fresh("char");
    this.define(rule, [...(single.length ? [[{ bytes: byteSet(single) }]] : []), ...multi]);
    this.#classes.set(key, rule);
    return { rule };
  }

  /** The rule for the continuation bytes `ranges`, one range after the other (shared). */
  #tail(ranges: Array<[number, number]>): number {
    const key = JSON.stringify(ranges);
    let rule = this.#tails.get(key);
    if (rule === undefined) {
      rule = this.fresh("utf8-tail");
      const rest: Element[] = ranges.length > 1 ? [{ rule: this.#tail(ranges.slice(1)) }] : [];
      this.define(rule, [[{ bytes: byteSet([ranges[0]]) }, ...rest]]);
      this.#tails.set(key, rule);
    }
    return rule;
  }

  /** The flat grammar starting at `rootName`, refused when a rule is missing or left-recursive. */
  build(rootName = "root"): Grammar {
    const root = this.#ids.get(rootName);
    if (root === undefined || this.#defs[root] === undefined) {
      throw new ConstraintError("invalid_grammar", `the grammar has no '${rootName}' rule`);
    }
    this.#defs.forEach((def, i) => {
      if (def === undefined) {
        const where = this.#firstUse[i] ? ` (used at ${this.#firstUse[i]})` : "";
        throw new ConstraintError("invalid_grammar", `undefined rule '${this.#names[i]}'${where}`);
      }
    });
    const defs = this.#defs as Element[][][];
    checkLeftRecursion(defs, this.#names);
    const kind: number[] = [];
    const arg: number[] = [];
    const sets: Uint32Array[] = [];
    const setIds = new Map<string, number>();
    const alternatives = defs.map((alts) =>
      Int32Array.from(alts, (alt) => {
        const start = kind.length;
        for (const e of alt) {
          if ("rule" in e) {
            kind.push(RULE);
            arg.push(e.rule);
          } else {
            const key = e.bytes.join(",");
            let id = setIds.get(key);
            if (id === undefined) {
              id = sets.length;
              sets.push(e.bytes);
              setIds.set(key, id);
            }
            kind.push(BYTES);
            arg.push(id);
          }
        }
        kind.push(END);
        arg.push(0);
        return start;
      })
    );
    return {
      names: [...this.#names],
      root,
      alternatives,
      kind: Uint8Array.from(kind),
      arg: Int32Array.from(arg),
      byteSets: sets,
    };
  }
}

/**
 * Refuses what llama.cpp's loader refuses as left recursion (a rule reached again through
 * leftmost references, looking past those with an empty alternative), and what it misses
 * but could not run either: a rule that begins with itself through rules that may match
 * nothing, where the stack would grow with every round (a non-tail reference in the
 * cycle). A cycle of tail references only (`(x?)*`) returns to the same stack and is fine.
 */
function checkLeftRecursion(defs: Element[][][], names: readonly string[]): void {
  const refuse = (rule: number, how: string): never => {
    throw new ConstraintError(
      "invalid_grammar",
      `left recursion: rule '${names[rule]}' can begin with itself${how}`,
    );
  };
  llamaLeftRecursion(defs, refuse);

  const nullable = new Array<boolean>(defs.length).fill(false);
  for (let changed = true; changed;) {
    changed = false;
    defs.forEach((alts, r) => {
      if (nullable[r]) return;
      if (alts.some((alt) => alt.every((e) => "rule" in e && nullable[e.rule]))) {
        nullable[r] = changed = true;
      }
    });
  }
  const edges: Array<Array<{ to: number; tail: boolean }>> = defs.map((alts) => {
    const out: Array<{ to: number; tail: boolean }> = [];
    for (const alt of alts) {
      for (let i = 0; i < alt.length; i++) {
        const e = alt[i];
        if (!("rule" in e)) break;
        out.push({ to: e.rule, tail: i === alt.length - 1 });
        if (!nullable[e.rule]) break;
      }
    }
    return out;
  });
  const component = components(edges.map((list) => list.map((e) => e.to)));
  edges.forEach((list, r) => {
    for (const e of list) {
      if (!e.tail && component[e.to] === component[r]) {
        refuse(r, ` through '${names[e.to]}', growing the stack every round`);
      }
    }
  });
}

/** llama.cpp's check (llama_grammar_detect_left_recursion), visited rules remembered. */
function llamaLeftRecursion(defs: Element[][][], refuse: (rule: number, how: string) => never) {
  const visited = new Uint8Array(defs.length);
  const inProgress = new Uint8Array(defs.length);
  const mayBeEmpty = defs.map((alts) => alts.some((alt) => alt.length === 0));
  const visit = (r: number): boolean => {
    if (inProgress[r]) return true;
    if (visited[r]) return false;
    inProgress[r] = 1;
    for (const alt of defs[r]) {
      for (const e of alt) {
        if (!("rule" in e)) break;
        if (visit(e.rule)) return true;
        if (!mayBeEmpty[e.rule]) break;
      }
    }
    inProgress[r] = 0;
    visited[r] = 1;
    return false;
  };
  for (let r = 0; r < defs.length; r++) if (!visited[r] && visit(r)) refuse(r, "");
}

/** Strongly connected components (Kosaraju, iterative): a component id per node. */
function components(next: number[][]): Int32Array {
  const n = next.length;
  const order: number[] = [];
  const seen = new Uint8Array(n);
  for (let s = 0; s < n; s++) {
    if (seen[s]) continue;
    const stack: Array<[number, number]> = [[s, 0]];
    seen[s] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      if (top[1] < next[top[0]].length) {
        const v = next[top[0]][top[1]++];
        if (!seen[v]) {
          seen[v] = 1;
          stack.push([v, 0]);
        }
      } else {
        order.push(top[0]);
        stack.pop();
      }
    }
  }
  const prev: number[][] = next.map(() => []);
  next.forEach((list, u) => list.forEach((v) => prev[v].push(u)));
  const comp = new Int32Array(n).fill(-1);
  let c = 0;
  for (let i = order.length - 1; i >= 0; i--) {
    const s = order[i];
    if (comp[s] >= 0) continue;
    const stack = [s];
    comp[s] = c;
    while (stack.length > 0) {
      const u = stack.pop()!;
      for (const v of prev[u]) {
        if (comp[v] < 0) {
          comp[v] = c;
          stack.push(v);
        }
      }
    }
    c++;
  }
  return comp;
}
