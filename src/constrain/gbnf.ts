/**
 * GBNF, llama.cpp's grammar syntax (grammars/README.md there), read as llama.cpp's
 * grammar parser reads it: `name ::= alternatives` rules ending at a newline (newlines
 * inside parentheses are free), "literals", [classes] with ranges and `^`, `.`, groups,
 * `* + ? {m} {m,} {m,n}` (repetitions above 2000 refused or unbounded, as there), `#`
 * comments, the escapes \x \u \U \t \r \n \\ \" \[ \] \-. Repetitions are rewritten into
 * helper rules the same way, so a grammar matches exactly what llama.cpp's matches.
 * Token references (`<[id]>`, `<token>`) are refused: they depend on one vocabulary.
 * Errors name the line and column.
 */

import { ConstraintError } from "./errors.ts";
import { type Element, type Grammar, GrammarBuilder } from "./grammar.ts";

/** Repetition counts past this are refused (minimum) or unbounded (maximum), as in llama.cpp. */
const MAX_REPETITION = 2000;
/** GBNF text longer than this is refused before it is read. */
export const MAX_GRAMMAR_CHARS = 1 << 20;

export function parseGbnf(text: string, rootName = "root"): Grammar {
  const builder = new GrammarBuilder();
  addGbnf(builder, text, "", rootName);
  return builder.build(rootName);
}

/**
 * Reads GBNF rules into `builder`, every rule name prefixed (so that grammars of several
 * sources can be joined); the text must define `rootName`. With `shared`, it may use rules
 * other texts define in the same builder (which checks them when it builds).
 */
export function addGbnf(
  builder: GrammarBuilder,
  text: string,
  prefix = "",
  rootName = "root",
  shared = false,
): void {
  if (text.length > MAX_GRAMMAR_CHARS) {
    throw new ConstraintError(
      "grammar_too_complex",
      `the grammar has ${text.length} characters; at most ${MAX_GRAMMAR_CHARS} are read`,
    );
  }
  const parser = new GbnfParser(text, builder, prefix);
  parser.parse(shared);
  if (!parser.defined.has(rootName)) {
    throw new ConstraintError("invalid_grammar", `the grammar has no '${rootName}' rule`);
  }
}

const isWordChar = (c: string): boolean => /^[a-zA-Z0-9-]$/.test(c);
const isDigit = (c: string): boolean => c >= "0" && c <= "9";

class GbnfParser {
  readonly builder: GrammarBuilder;
  /** The rule names this text defines (unprefixed). */
  readonly defined = new Set<string>();
  readonly #text: string;
  readonly #prefix: string;
  /** Rules referenced, with where each was first. */
  readonly #used = new Map<string, string>();
  #pos = 0;

  constructor(text: string, builder: GrammarBuilder, prefix: string) {
    this.#text = text;
    this.builder = builder;
    this.#prefix = prefix;
  }

  parse(shared: boolean): void {
    this.#space(true);
    while (this.#pos < this.#text.length) this.#rule();
    for (const [name, at] of this.#used) {
      if (!shared && !this.defined.has(name)) {
        throw new ConstraintError("invalid_grammar", `undefined rule '${name}' (used at ${at})`);
      }
    }
  }

  #peek(offset = 0): string {
    return this.#text[this.#pos + offset] ?? "";
  }

  #where(at = this.#pos): string {
    const before = this.#text.slice(0, at);
    const line = before.split("\n").length;
    const col = at - before.lastIndexOf("\n");
    return `line ${line}, column ${col}`;
  }

  #fail(message: string, at = this.#pos): never {
    const rest = this.#text.slice(at, at + 20).split("\n")[0];
    const near = at >= this.#text.length ? "at the end" : `near '${rest}'`;
    throw new ConstraintError("invalid_grammar", `${message} at ${this.#where(at)} (${near})`);
  }

  #space(newlineOk: boolean): void {
    for (;;) {
      const c = this.#peek();
      if (c === "#") {
        while (this.#pos < this.#text.length && !"\r\n".includes(this.#peek())) this.#pos++;
      } else if (c === " " || c === "\t" || (newlineOk && (c === "\r" || c === "\n"))) {
        this.#pos++;
      } else {
        return;
      }
    }
  }

  #name(): string {
    const start = this.#pos;
    while (isWordChar(this.#peek())) this.#pos++;
    if (this.#pos === start) this.#fail("expecting a rule name");
    return this.#text.slice(start, this.#pos);
  }

  #int(): number {
    const start = this.#pos;
    while (isDigit(this.#peek())) this.#pos++;
    if (this.#pos === start) this.#fail("expecting an integer");
    return Number(this.#text.slice(start, this.#pos));
  }

  #rule(): void {
    const name = this.#name();
    this.#space(false);
    this.defined.add(name);
    const rule = this.builder.ruleId(this.#prefix + name);
    if (this.#text.slice(this.#pos, this.#pos + 3) !== "::=") this.#fail("expecting '::='");
    this.#pos += 3;
    this.#space(true);
    this.builder.define(rule, this.#alternatives(name, false));
    const c = this.#peek();
    if (c === "\r") this.#pos += this.#peek(1) === "\n" ? 2 : 1;
    else if (c === "\n") this.#pos++;
    else if (c !== "") this.#fail("expecting a newline or the end");
    this.#space(true);
  }

  #alternatives(name: string, nested: boolean): Element[][] {
    const alts = [this.#sequence(name, nested)];
    while (this.#peek() === "|") {
      this.#pos++;
      this.#space(true);
      alts.push(this.#sequence(name, nested));
    }
    return alts;
  }

  #sequence(name: string, nested: boolean): Element[] {
    const seq: Element[] = [];
    let lastStart = -1;
    for (;;) {
      const c = this.#peek();
      if (c === '"') {
        this.#pos++;
        lastStart = seq.length;
        while (this.#peek() !== '"') {
          if (this.#peek() === "") this.#fail("unexpected end of input in a literal");
          seq.push(...this.builder.literal(String.fromCodePoint(this.#char())));
        }
        this.#pos++;
        this.#space(nested);
      } else if (c === "[") {
        this.#pos++;
        const negated = this.#peek() === "^";
        if (negated) this.#pos++;
        const ranges: Array<[number, number]> = [];
        while (this.#peek() !== "]") {
          if (this.#peek() === "") this.#fail("unexpected end of input in a character class");
          const lo = this.#char();
          if (this.#peek() === "-" && this.#peek(1) !== "]") {
            this.#pos++;
            if (this.#peek() === "") this.#fail("unexpected end of input in a character class");
            ranges.push([lo, this.#char()]);
          } else {
            ranges.push([lo, lo]);
          }
        }
        this.#pos++;
        lastStart = seq.length;
        if (ranges.length === 0) this.#fail("an empty character class");
        seq.push(this.#class(ranges, negated));
        this.#space(nested);
      } else if (c === "<" || c === "!") {
        this.#fail("token references (<...>) are not supported");
      } else if (isWordChar(c)) {
        const at = this.#where();
        const ref = this.#name();
        if (!this.#used.has(ref)) this.#used.set(ref, at);
        lastStart = seq.length;
        seq.push({ rule: this.builder.ruleId(this.#prefix + ref, at) });
        this.#space(nested);
      } else if (c === "(") {
        this.#pos++;
        this.#space(true);
        const sub = this.builder.fresh(this.#prefix + name);
        this.builder.define(sub, this.#alternatives(name, true));
        if (this.#peek() !== ")") this.#fail("expecting ')'");
        this.#pos++;
        lastStart = seq.length;
        seq.push({ rule: sub });
        this.#space(nested);
      } else if (c === ".") {
        this.#pos++;
        lastStart = seq.length;
        seq.push(this.#class([], true));
        this.#space(nested);
      } else if (c === "*" || c === "+" || c === "?") {
        const at = this.#pos;
        this.#pos++;
        this.#space(nested);
        const [min, max] = c === "*" ? [0, Infinity] : c === "+" ? [1, Infinity] : [0, 1];
        this.#repeat(seq, lastStart, min, max, name, at);
      } else if (c === "{") {
        const at = this.#pos;
        this.#pos++;
        this.#space(nested);
        if (!isDigit(this.#peek())) this.#fail("expecting an integer");
        const min = this.#int();
        this.#space(nested);
        let max = Infinity;
        if (this.#peek() === "}") {
          max = min;
          this.#pos++;
        } else if (this.#peek() === ",") {
          this.#pos++;
          this.#space(nested);
          if (isDigit(this.#peek())) {
            max = this.#int();
            this.#space(nested);
          }
          if (this.#peek() !== "}") this.#fail("expecting '}'");
          this.#pos++;
        } else {
          this.#fail("expecting ',' or '}'");
        }
        this.#space(nested);
        if (min > MAX_REPETITION) {
          this.#fail(`a repetition of at least ${min} (more than ${MAX_REPETITION})`, at);
        }
        if (max > MAX_REPETITION) max = Infinity;
        if (max < min) this.#fail(`a repetition of at most ${max} but at least ${min}`, at);
        this.#repeat(seq, lastStart, min, max, name, at);
      } else {
        return seq;
      }
    }
  }

  /** A `[...]` class, or `.` (every character but NUL). */
  #class(ranges: Array<[number, number]>, negated: boolean): Element {
    try {
      return this.builder.characterClass(ranges, negated);
    } catch (err) {
      if (err instanceof ConstraintError && err.code === "invalid_grammar") this.#fail(err.message);
      throw err;
    }
  }

  /** One character of a literal or class, escapes read. */
  #char(): number {
    const c = this.#peek();
    if (c === "\\") {
      const e = this.#peek(1);
      const hex = (n: number): number => {
        const digits = this.#text.slice(this.#pos + 2, this.#pos + 2 + n);
        if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(digits)) {
          this.#fail(`expecting ${n} hex digits after \\${e}`);
        }
        this.#pos += 2 + n;
        const cp = parseInt(digits, 16);
        if (cp > 0x10ffff) this.#fail(`\\${e}${digits} is past the last code point`);
        return cp;
      };
      switch (e) {
        case "x":
          return hex(2);
        case "u":
          return hex(4);
        case "U":
          return hex(8);
      }
      const simple: Record<string, number> = {
        t: 9,
        r: 13,
        n: 10,
        "\\": 92,
        '"': 34,
        "[": 91,
        "]": 93,
        "-": 45,
      };
      if (!(e in simple)) this.#fail(`unknown escape '\\${e}'`);
      this.#pos += 2;
      return simple[e];
    }
    const cp = this.#text.codePointAt(this.#pos)!;
    this.#pos += cp > 0xffff ? 2 : 1;
    return cp;
  }

  /**
   * Applies `{min,max}` to the item that starts at `lastStart`, as llama.cpp rewrites it:
   * the item `min` times, then `max - min` nested optional rules (or one recursive rule
   * when unbounded).
   */
  #repeat(
    seq: Element[],
    lastStart: number,
    min: number,
    max: number,
    name: string,
    at: number,
  ): void {
    if (lastStart < 0 || lastStart >= seq.length) {
      this.#fail("expecting an item before a repetition", at);
    }
    const item = seq.slice(lastStart);
    seq.length = lastStart;
    for (let i = 0; i < min; i++) seq.push(...item);
    if (max === Infinity) {
      const rec = this.builder.fresh(this.#prefix + name);
      this.builder.define(rec, [[...item, { rule: rec }], []]);
      seq.push({ rule: rec });
      return;
    }
    let last = -1;
    for (let i = 0; i < max - min; i++) {
      const rec = this.builder.fresh(this.#prefix + name);
      this.builder.define(rec, [[...item, ...(last >= 0 ? [{ rule: last }] : [])], []]);
      last = rec;
    }
    if (last >= 0) seq.push({ rule: last });
  }
}
