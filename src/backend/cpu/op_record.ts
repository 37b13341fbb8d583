/**
 * The recording under an OpList (op_list.ts): the words and integers of the ops recorded
 * so far, their one foreign call (nk_run_ops) and the step templates (step_template.ts)
 * that let a step run without being recorded again. Ops are [code, words, arguments...],
 * every word a double (kernels/cpu/oplist.c says why).
 */

import { checkStatus } from "./errors.ts";
import type { KvSequence } from "./kv_layout.ts";
import type { CpuSymbols } from "./library.ts";
import type { OpTime, Step, StepInterrupt } from "../backend.ts";
import { type Operand, operandPointer } from "./native_buffer.ts";
import {
  fillInts,
  type IntCheck,
  IntTrace,
  type StepTemplate,
  writeSequenceTriples,
} from "./step_template.ts";

/** nk_run_ops stopped by its interrupt word. */
const NK_EINTERRUPTED = -4;

/** Step templates kept (step_template.ts): a few decode batch sizes in turn. */
const TEMPLATES_MAX = 16;

/** A native address as a number (exact: user-space addresses are below 2^47). */
export function address(p: Deno.PointerObject): number {
  return Number(Deno.UnsafePointer.value(p));
}

export class OpRecord {
  readonly #sym: CpuSymbols;
  readonly #pool: () => Deno.PointerObject;
  #words = new Float64Array(8192);
  #nWords = 0;
  #ints = new Int32Array(4096);
  #nInts = 0;
  /** Each recorded op's name, for the error of one that fails. */
  #names: string[] = [];
  /** Typed-array operands, kept alive (their memory in place) until the list runs. */
  #keep: ArrayBufferView[] = [];
  readonly #failed = new Int32Array(1);
  /** The integers of the step being recorded, traced for a template (null: none). */
  #trace: IntTrace | null = null;
  #traceKey = "";
  readonly #templates = new Map<string, StepTemplate>();
  /** What copyOnce copied in the step being recorded, by what it was copied from. */
  #copied: { key: readonly unknown[]; value: unknown }[] = [];
  /** While profiling, each op's native time in the flush running (-1: it did not run). */
  #opNs: Float64Array | null = null;
  /** Time and calls by op name since profiling started or was last taken. */
  readonly #profile = new Map<string, { calls: number; ns: number }>();
  /** nk_row_bytes by "type:cols": a foreign call saved per recorded product. */
  readonly #rowBytes = new Map<string, number>();

  /** `pool` returns the native pool, or throws once it is gone. */
  constructor(sym: CpuSymbols, pool: () => Deno.PointerObject) {
    this.#sym = sym;
    this.#pool = pool;
  }

  /** Bytes of a row of `cols` values of `type`; negative when not computable. */
  rowBytes(type: number, cols: number): number {
    const key = `${type}:${cols}`;
    let rb = this.#rowBytes.get(key);
    if (rb === undefined) {
      rb = Number(this.#sym.nk_row_bytes(type, BigInt(cols)));
      this.#rowBytes.set(key, rb);
    }
    return rb;
  }

  /** Ops recorded and not yet run. */
  get pending(): number {
    return this.#names.length;
  }

  /**
   * Runs the recorded ops, in order, and empties the list (also when one fails). With
   * `interrupt`, stops between two ops once it fires and returns false: the ops after that
   * point never run.
   */
  flush(interrupt?: StepInterrupt): boolean {
    // A step that runs part of its ops before it ends cannot be replayed as one list.
    this.#trace = null;
    if (this.#names.length === 0) return true;
    const names = this.#names;
    let opNs = this.#opNs;
    if (opNs !== null) {
      if (opNs.length < names.length) opNs = this.#opNs = new Float64Array(2 * names.length);
      opNs.fill(-1, 0, names.length);
    }
    let rc: number;
    this.#failed[0] = -1;
    try {
      rc = this.#sym.nk_run_ops(
        this.#pool(),
        this.#words,
        BigInt(this.#nWords),
        this.#ints,
        this.#failed,
        interrupt?.word ?? null,
        interrupt?.seen ?? 0,
        opNs,
      );
    } finally {
      this.discard();
      if (opNs !== null) this.#addProfile(names, opNs);
    }
    if (rc === NK_EINTERRUPTED) return false;
    checkStatus(names[this.#failed[0]] ?? "runOps", rc);
    return true;
  }

  /**
   * Starts timing each op as it runs (forgetting what was kept), or stops. The clock is
   * read twice per op, ~50 ns: a decode step of ~420 ops runs ~20 us slower.
   */
  profileOps(on: boolean): void {
    this.#opNs = on ? new Float64Array(1024) : null;
    this.#profile.clear();
  }

  /** Each kind of op's time since profiling started or this was last called; clears it. */
  takeOpProfile(): OpTime[] {
    const times = [...this.#profile].map(([op, t]) => ({ op, calls: t.calls, ms: t.ns / 1e6 }));
    this.#profile.clear();
    return times;
  }

  #addProfile(names: readonly string[], opNs: Float64Array): void {
    for (let i = 0; i < names.length; i++) {
      if (opNs[i] < 0) continue;
      const t = this.#profile.get(names[i]);
      if (t === undefined) this.#profile.set(names[i], { calls: 1, ns: opNs[i] });
      else {
        t.calls++;
        t.ns += opNs[i];
      }
    }
  }

  /** Forgets the recorded ops without running them. */
  discard(): void {
    this.#trace = null;
    this.#nWords = 0;
    this.#nInts = 0;
    // A failed flush names its op from the array it holds: that one is replaced, not emptied.
    this.#names = [];
    this.#keep.length = 0;
    this.#copied.length = 0;
  }

  /**
   * Starts recording a step that a later step with the same `key` may replay: the key
   * must name everything the step's words depend on (buffers, shapes), and `step` holds
   * the arrays its integers come from. Only a step recorded into an empty list, whose
   * integers all come from `step`, becomes a template (at endStep).
   */
  beginStep(key: string, step: Step): void {
    this.#trace = this.#names.length === 0 ? new IntTrace(step) : null;
    this.#traceKey = key;
  }

  /** Ends the step begun by beginStep, keeping it as a template when it can be replayed. */
  endStep(): void {
    const trace = this.#trace;
    this.#trace = null;
    this.#copied.length = 0;
    if (trace === null || !trace.replayable || this.#keep.length > 0) return;
    if (this.#templates.size >= TEMPLATES_MAX && !this.#templates.has(this.#traceKey)) {
      this.#templates.delete(this.#templates.keys().next().value!);
    }
    this.#templates.set(this.#traceKey, {
      words: this.#words.slice(0, this.#nWords),
      names: this.#names.slice(),
      sources: trace.sources,
      checks: [...trace.checks.values()],
      nInts: this.#nInts,
    });
  }

  /** Queues the template of `key` with `step`'s integers instead of recording the step;
   * false when there is none (or the list is not empty): then record it. */
  replayStep(key: string, step: Step): boolean {
    const t = this.#templates.get(key);
    if (t === undefined || this.#names.length > 0) return false;
    // The checks recording makes (block ids within the cache, logit rows within the
    // step): a replayed step's integers reach the kernels unchecked otherwise.
    for (const check of t.checks) check(step);
    if (this.#ints.length < t.nInts) this.#ints = new Int32Array(2 * t.nInts);
    if (fillInts(t, step, this.#ints) < 0) return false;
    if (this.#words.length < t.words.length) this.#words = new Float64Array(2 * t.words.length);
    this.#words.set(t.words);
    this.#nWords = t.words.length;
    this.#nInts = t.nInts;
    this.#names = t.names.slice();
    return true;
  }

  /** Forgets every template: the buffers their words name may be gone. */
  forgetSteps(): void {
    this.#templates.clear();
  }

  protected push(name: string, code: number, args: number[]): void {
    const end = this.#nWords + 2 + args.length;
    if (end > this.#words.length) {
      const grown = new Float64Array(2 * end);
      grown.set(this.#words.subarray(0, this.#nWords));
      this.#words = grown;
    }
    const w = this.#words, at = this.#nWords;
    w[at] = code;
    w[at + 1] = 2 + args.length;
    for (let i = 0; i < args.length; i++) w[at + 2 + i] = args[i];
    this.#nWords = end;
    this.#names.push(name);
  }

  /** The address of an operand checked to hold `bytes`; typed arrays are kept alive. */
  protected addr(op: string, name: string, operand: Operand, bytes: number): number {
    const p = operandPointer(op, name, operand, bytes);
    if (ArrayBuffer.isView(operand)) this.#keep.push(operand);
    return address(p);
  }

  /** Room for n more integers in the list; returns their offset there. */
  protected reserveInts(n: number): number {
    if (this.#nInts + n > this.#ints.length) {
      const grown = new Int32Array(2 * (this.#nInts + n));
      grown.set(this.#ints.subarray(0, this.#nInts));
      this.#ints = grown;
    }
    const at = this.#nInts;
    this.#nInts = at + n;
    return at;
  }

  /** Copies the first n values of `a` into the list; returns their offset there. */
  protected copyInts(a: Int32Array, n: number): number {
    const at = this.reserveInts(n);
    this.#ints.set(n === a.length ? a : a.subarray(0, n), at);
    this.#trace?.copied(a, n);
    return at;
  }

  /**
   * `copy()`, or what it returned to an earlier op of the step being recorded with the same
   * `key` (compared item by item): a step's inputs stay as they are while it is recorded, so
   * the ops that read the same integers share one copy of them (a decode step's 28 layers
   * read one block table and one position). A replay then fills in a few integers, not
   * hundreds.
   */
  protected copyOnce<T>(key: readonly unknown[], copy: () => T): T {
    if (this.#trace === null) return copy();
    const prior = this.#copied.find((c) =>
      c.key.length === key.length && c.key.every((k, i) => k === key[i])
    );
    if (prior !== undefined) return prior.value as T;
    const value = copy();
    this.#copied.push({ key, value });
    return value;
  }

  /** Writes each sequence's (row start, row count, table length); returns their offset. */
  protected copySequenceTriples(sequences: readonly KvSequence[]): number {
    const at = this.reserveInts(3 * sequences.length);
    this.#trace?.sequencesWritten(sequences);
    writeSequenceTriples(sequences, this.#ints, at);
    return at;
  }

  /** Registers, once per `what`, a check of the step's integers that a replay repeats. */
  protected traceCheck(what: unknown, check: IntCheck): void {
    if (this.#trace !== null && !this.#trace.checks.has(what)) this.#trace.checks.set(what, check);
  }

  /** Keeps a typed-array operand alive until the list runs. */
  protected keep(operand: ArrayBufferView): void {
    this.#keep.push(operand);
  }

  /** Integers recorded so far (the offset the next copy lands at). */
  protected get intsUsed(): number {
    return this.#nInts;
  }
}
