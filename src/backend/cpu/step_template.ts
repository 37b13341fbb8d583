/**
 * Recorded steps kept for replay. Recording a decode step op by op costs the JavaScript
 * thread 0.5-1 ms while the pool's threads wait (about 5% of a Qwen3-0.6B token on two
 * cores), yet consecutive decode steps of the same shape record the same words: the same
 * weights, activations and cache, with only their integers (token ids, positions, block
 * tables, logit rows) changed. A template keeps a step's words and where each of its
 * integers came from, so the next step of that shape writes its own integers into the
 * same places and runs the list without recording it.
 */

import type { KvCache, Step } from "../backend.ts";
import type { KvSequence } from "./kv_layout.ts";

/** Where a run of a template's integers comes from. */
type IntSource =
  | { kind: "ids" | "logitRows" }
  | { kind: "positions"; n: number }
  | { kind: "table"; seq: number }
  | { kind: "sequences" };

/** A check recording ran on the step's integers, run again on a replayed step's. */
export type IntCheck = (step: Step) => void;

export interface StepTemplate {
  readonly words: Float64Array;
  readonly names: readonly string[];
  readonly sources: readonly IntSource[];
  readonly checks: readonly IntCheck[];
  readonly nInts: number;
}

/** The integers of a step being recorded, traced to the step's inputs. */
export class IntTrace {
  readonly sources: IntSource[] = [];
  /** Keyed by what they check (a cache layout, a row count), so each runs once. */
  readonly checks = new Map<unknown, IntCheck>();
  /** False once an integer came from anything but the step's inputs. */
  replayable = true;

  constructor(readonly step: Step) {}

  /** The first n values of `a` were copied into the list. */
  copied(a: Int32Array, n: number): void {
    const { ids, logitRows, layout: { positions, sequences } } = this.step;
    if (a === ids && n === ids.length) this.sources.push({ kind: "ids" });
    else if (a === logitRows && n === logitRows.length) this.sources.push({ kind: "logitRows" });
    else if (a === positions) this.sources.push({ kind: "positions", n });
    else {
      const seq = sequences.findIndex((s) => s.blockTable === a);
      if (seq >= 0 && n === a.length) this.sources.push({ kind: "table", seq });
      else this.replayable = false;
    }
  }

  /** The (row start, row count, table length) triples of `sequences` were written. */
  sequencesWritten(sequences: readonly KvSequence[]): void {
    if (sequences === this.step.layout.sequences) this.sources.push({ kind: "sequences" });
    else this.replayable = false;
  }
}

/** Each sequence's (row start, row count, table length), from `at` on: how the kernels
 * take a step's sequences. */
export function writeSequenceTriples(
  sequences: readonly KvSequence[],
  into: Int32Array,
  at: number,
): void {
  sequences.forEach((s, i) => {
    into[at + 3 * i] = s.rowStart;
    into[at + 3 * i + 1] = s.rowCount;
    into[at + 3 * i + 2] = s.blockTable.length;
  });
}

/** Writes a new step's integers where the template's came from; returns how many, or -1
 * when the step does not fit the template (then it must be recorded). */
export function fillInts(t: StepTemplate, step: Step, into: Int32Array): number {
  const { ids, logitRows, layout: { positions, sequences } } = step;
  let at = 0;
  const put = (a: Int32Array, n: number) => {
    for (let i = 0; i < n; i++) into[at + i] = a[i];
    at += n;
  };
  for (const src of t.sources) {
    switch (src.kind) {
      case "ids":
        put(ids, ids.length);
        break;
      case "logitRows":
        put(logitRows, logitRows.length);
        break;
      case "positions":
        if (positions.length < src.n) return -1;
        put(positions, src.n);
        break;
      case "table": {
        const table = sequences[src.seq]?.blockTable;
        if (table === undefined) return -1;
        put(table, table.length);
        break;
      }
      case "sequences":
        writeSequenceTriples(sequences, into, at);
        at += 3 * sequences.length;
        break;
    }
    if (at > into.length) return -1;
  }
  return at === t.nInts ? at : -1;
}

/**
 * Names steps by what their recorded words depend on besides their integers: the cache
 * they write and their shape (rows, output rows and what they hold, and each sequence's
 * rows and table length). Buffers are not named: the backend forgets every template when
 * one is allocated or freed. Consecutive decode steps have the same shape, so the last key
 * is reused while the numbers it was made from match.
 */
export class StepKeys {
  readonly #cacheIds = new WeakMap<KvCache, number>();
  #nextCacheId = 0;
  readonly #parts: number[] = [];
  #last: { parts: number[]; key: string } = { parts: [], key: "" };

  keyOf(step: Step, cache: KvCache): string {
    let cacheId = this.#cacheIds.get(cache);
    if (cacheId === undefined) {
      cacheId = this.#nextCacheId++;
      this.#cacheIds.set(cache, cacheId);
    }
    const parts = this.#parts;
    parts.length = 0;
    const hidden = step.output === "hidden" ? 1 : 0;
    parts.push(cacheId, step.layout.positions.length, step.logitRows.length, hidden);
    const sequences = step.layout.sequences;
    for (let i = 0; i < sequences.length; i++) {
      const s = sequences[i];
      parts.push(s.rowStart, s.rowCount, s.blockTable.length);
    }
    const last = this.#last;
    if (parts.length === last.parts.length && parts.every((v, i) => v === last.parts[i])) {
      return last.key;
    }
    this.#last = { parts: parts.slice(), key: parts.join("|") };
    return this.#last.key;
  }
}
