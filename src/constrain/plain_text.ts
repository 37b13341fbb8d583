/**
 * Plain text (whole UTF-8 characters, none of them a quote, a backslash or a control
 * character) as the automaton sees it: how many characters deep every plain string stays
 * alive from a state. Inside a JSON string, or free text in a grammar, that is as far as
 * the string may still run (its maxLength), or forever. The search goes one character at a
 * time: the states one plain character leads to from a state are found once, by a
 * byte-level search over its UTF-8 forms, and kept; a string with a length bound then
 * costs one lookup per character of look-ahead.
 */

import { DEAD } from "./automaton.ts";

/**
 * The UTF-8 decoder of plain text: `STEP[u * 256 + b]` is the state after byte b in state
 * u, or -1 where b cannot come next. State 0 is a character boundary; 1-3 want that many
 * continuation bytes; 4-7 want the restricted first continuation after E0, ED, F0 and F4
 * (no overlong forms, no surrogates, nothing past U+10FFFF).
 */
const STEP = (() => {
  const step = new Int8Array(8 * 256).fill(-1);
  const range = (u: number, lo: number, hi: number, to: number) => {
    for (let b = lo; b <= hi; b++) step[u * 256 + b] = to;
  };
  range(0, 0x20, 0x7e, 0);
  step[0x22] = step[0x5c] = -1;
  range(0, 0xc2, 0xdf, 1);
  range(0, 0xe0, 0xe0, 4);
  range(0, 0xe1, 0xef, 2);
  range(0, 0xed, 0xed, 5);
  range(0, 0xf0, 0xf0, 6);
  range(0, 0xf1, 0xf3, 3);
  range(0, 0xf4, 0xf4, 7);
  range(1, 0x80, 0xbf, 0);
  range(2, 0x80, 0xbf, 1);
  range(3, 0x80, 0xbf, 2);
  range(4, 0xa0, 0xbf, 1);
  range(5, 0x80, 0x9f, 1);
  range(6, 0x90, 0xbf, 2);
  range(7, 0x80, 0x8f, 2);
  return step;
})();

/** The bytes each decoder state may read. */
const NEXT_BYTES: readonly Uint8Array[] = Array.from({ length: 8 }, (_, u) => {
  const bytes: number[] = [];
  for (let b = 0; b < 256; b++) if (STEP[u * 256 + b] >= 0) bytes.push(b);
  return Uint8Array.from(bytes);
});

/** Whether `bytes` are whole plain-text characters. */
export function isPlainText(bytes: Uint8Array): boolean {
  let u = 0;
  for (let i = 0; i < bytes.length && u >= 0; i++) u = STEP[u * 256 + bytes[i]];
  return bytes.length > 0 && u === 0;
}

/** How far ahead a search looks when plain text does not come back to the same states. */
export const LOOK_AHEAD = 24;

/** States a search may carry at one depth before it gives up. */
const MAX_FRONTIER = 64;

/** The automaton's transition table, computed on demand (ByteAutomaton). */
export interface Transitions {
  readonly table: Int32Array;
  computeRow(state: number): void;
}

/** How plain text stands from a state. */
export interface PlainReach {
  /** Characters every plain string stays alive for, every prefix of it (maybe Infinity). */
  alive: number;
  /** No plain string of more than `alive` characters is alive: they are exactly those. */
  closed: boolean;
}

/** From one state: the states after one plain character, and whether none is alive. */
interface Step {
  /** Null: some prefix of a plain character is dead. */
  ends: Int32Array | null;
  /** No plain character can come at all (its first byte is dead, whichever it is). */
  none: boolean;
}

export class PlainText {
  readonly #automaton: Transitions;
  readonly #steps = new Map<number, Step>();

  constructor(automaton: Transitions) {
    this.#automaton = automaton;
  }

  /**
   * How far plain text stays alive from `state`: at most LOOK_AHEAD characters, or
   * Infinity where the states after each character come back to the same set (text may
   * run on forever).
   */
  reach(state: number): PlainReach {
    let frontier: Int32Array = Int32Array.of(state);
    let last = "";
    for (let depth = 1; depth <= LOOK_AHEAD; depth++) {
      const next = this.#union(frontier);
      if (next === null) {
        return { alive: depth - 1, closed: frontier.every((s) => this.#step(s).none) };
      }
      const key = next.join(",");
      if (key === last) return { alive: Infinity, closed: false };
      last = key;
      frontier = next;
    }
    return { alive: LOOK_AHEAD, closed: false };
  }

  /** The sorted union of the steps of `states`; null when one is dead or it grows too big. */
  #union(states: Int32Array): Int32Array | null {
    if (states.length === 1) return this.#step(states[0]).ends;
    const next = new Set<number>();
    for (const s of states) {
      const ends = this.#step(s).ends;
      if (ends === null) return null;
      for (const t of ends) next.add(t);
    }
    return next.size > MAX_FRONTIER ? null : Int32Array.from(next).sort();
  }

  #step(state: number): Step {
    let step = this.#steps.get(state);
    if (step === undefined) {
      step = this.#search(state);
      this.#steps.set(state, step);
    }
    return step;
  }

  /** Every byte of every UTF-8 form of one plain character from `state`, breadth first. */
  #search(state: number): Step {
    const automaton = this.#automaton;
    const ends = new Set<number>();
    let pairs = [state << 3];
    let dead = 0;
    for (let level = 0; pairs.length > 0; level++) {
      const next = new Set<number>();
      for (const pair of pairs) {
        const from = pair >> 3, u = pair & 7;
        const row = from << 8;
        const bytes = NEXT_BYTES[u];
        let table = automaton.table;
        for (let i = 0; i < bytes.length; i++) {
          const b = bytes[i];
          let to = table[row | b];
          if (to < DEAD) {
            automaton.computeRow(from);
            table = automaton.table;
            to = table[row | b];
          }
          if (to === DEAD) {
            dead++;
            continue;
          }
          const v = STEP[u * 256 + b];
          if (v === 0) ends.add(to);
          else next.add((to << 3) | v);
        }
      }
      // One dead prefix settles it: the deeper bytes are not needed.
      if (dead > 0) return { ends: null, none: level === 0 && ends.size + next.size === 0 };
      if (next.size > MAX_FRONTIER) return { ends: null, none: false };
      pairs = [...next];
    }
    return {
      ends: ends.size > MAX_FRONTIER ? null : Int32Array.from(ends).sort(),
      none: false,
    };
  }
}
