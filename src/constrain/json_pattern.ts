/**
 * A JSON schema `pattern` (an ECMAScript regular expression, as validators run it with the
 * `u` flag) as GBNF over the *content* of a JSON string: what stands between the quotes,
 * with `"`, `\` and control characters in their escaped forms. An unanchored pattern may
 * match anywhere, so any text may stand before (no `^`) or after (no `$`) it. The grammar
 * may generate fewer strings than the pattern allows, never others: `.` and negated
 * classes produce characters that need no escape, `\s` a space or an escaped tab, newline
 * or carriage return. Lookaround, backreferences and word boundaries are refused.
 */

import { ConstraintError } from "./errors.ts";
import { gbnfClass, gbnfLiteral, JSON_PLAIN_EXCLUDED } from "./gbnf_text.ts";

const MAX_REPEAT = 2000;
type Range = [number, number];

const DIGIT: Range[] = [[0x30, 0x39]];
const WORD: Range[] = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Range[] = [[0x09, 0x0a], [0x0c, 0x0d], [0x20, 0x20]];
/** What `.` produces: plain JSON characters that are not line terminators. */
const DOT_EXCLUDED: Range[] = [...JSON_PLAIN_EXCLUDED as Range[], [0x2028, 0x2029]];
export const ANY_PLAIN = gbnfClass(DOT_EXCLUDED, true);

/** How a character stands in JSON string content. */
function jsonEscaped(cp: number): string {
  const named: Record<number, string> = {
    0x22: '\\"',
    0x5c: "\\\\",
    0x08: "\\b",
    0x0c: "\\f",
    0x0a: "\\n",
    0x0d: "\\r",
    0x09: "\\t",
  };
  if (cp in named) return named[cp];
  if (cp < 0x20 || cp === 0x7f) return `\\u${cp.toString(16).padStart(4, "0")}`;
  return String.fromCodePoint(cp);
}

/** A positive class as GBNF: plain characters in one class, the others escaped. */
function classOf(ranges: Range[]): string {
  const plain: Range[] = [];
  const escaped = new Set<number>();
  for (const [lo, hi] of ranges) {
    let start = lo;
    for (const [slo, shi] of JSON_PLAIN_EXCLUDED) {
      if (shi < start || slo > hi) continue;
      if (slo > start) plain.push([start, slo - 1]);
      for (let cp = Math.max(slo, start); cp <= Math.min(shi, hi); cp++) escaped.add(cp);
      start = Math.max(start, shi + 1);
    }
    if (start <= hi) plain.push([start, hi]);
  }
  const parts = [
    ...(plain.length ? [gbnfClass(plain)] : []),
    ...[...escaped].map((cp) => gbnfLiteral(jsonEscaped(cp))),
  ];
  return parts.length === 1 ? parts[0] : `(${parts.join(" | ")})`;
}

export function patternGrammar(pattern: string, where: string): string {
  return new PatternReader(pattern, where).read();
}

class PatternReader {
  #pos = 0;
  constructor(readonly pattern: string, readonly where: string) {}

  read(): string {
    const p = this.pattern;
    const start = p.startsWith("^");
    if (start) this.#pos = 1;
    const end = p.endsWith("$") && !p.endsWith("\\$");
    const body = this.#alternation(end ? p.length - 1 : p.length);
    if (this.#pos !== (end ? p.length - 1 : p.length)) this.#fail("an unbalanced ')'");
    return `${start ? "" : `${ANY_PLAIN}* `}(${body})${end ? "" : ` ${ANY_PLAIN}*`}`;
  }

  #fail(what: string): never {
    throw new ConstraintError(
      "unsupported_schema",
      `${this.where}: pattern ${
        JSON.stringify(this.pattern)
      } uses ${what} at offset ${this.#pos}, ` +
        "which cannot be enforced",
    );
  }

  #alternation(limit: number): string {
    const alts = [this.#sequence(limit)];
    while (this.#pos < limit && this.pattern[this.#pos] === "|") {
      this.#pos++;
      alts.push(this.#sequence(limit));
    }
    return alts.join(" | ");
  }

  #sequence(limit: number): string {
    const items: string[] = [];
    while (this.#pos < limit) {
      const c = this.pattern[this.#pos];
      if (c === "|" || c === ")") break;
      let atom = this.#atom(limit);
      atom = this.#quantified(atom, limit);
      items.push(atom);
    }
    return items.length === 0 ? '""' : items.join(" ");
  }

  #atom(limit: number): string {
    const p = this.pattern;
    const c = p[this.#pos];
    if (c === "(") {
      this.#pos++;
      if (p.startsWith("?:", this.#pos)) this.#pos += 2;
      else if (p.startsWith("?<", this.#pos) && !/^\?<[=!]/.test(p.slice(this.#pos))) {
        const close = p.indexOf(">", this.#pos);
        if (close < 0) this.#fail("an unterminated group name");
        this.#pos = close + 1;
      } else if (p[this.#pos] === "?") this.#fail("a lookaround or group flag");
      const inner = this.#alternation(limit);
      if (p[this.#pos] !== ")") this.#fail("an unterminated group");
      this.#pos++;
      return `(${inner})`;
    }
    if (c === "[") return this.#class();
    if (c === ".") {
      this.#pos++;
      return ANY_PLAIN;
    }
    if (c === "^" || c === "$") this.#fail(`an anchor '${c}' inside the pattern`);
    if (c === "*" || c === "+" || c === "?" || c === "{") {
      this.#fail("a quantifier with nothing before it");
    }
    if (c === "\\") return this.#escape(false) as string;
    const cp = p.codePointAt(this.#pos)!;
    this.#pos += cp > 0xffff ? 2 : 1;
    return gbnfLiteral(jsonEscaped(cp));
  }

  /** An escape: a GBNF expression, or (in a class) its ranges. */
  #escape(inClass: boolean): string | Range[] {
    const p = this.pattern;
    const e = p[this.#pos + 1];
    if (e === undefined) this.#fail("a trailing backslash");
    this.#pos += 2;
    const sets: Record<string, Range[]> = { d: DIGIT, w: WORD, s: SPACE };
    if (e in sets) return inClass ? sets[e] : classOf(sets[e]);
    if (e === "D" || e === "W" || e === "S") {
      if (inClass) this.#fail(`\\${e} inside a class`);
      const excluded = [...DOT_EXCLUDED, ...sets[e.toLowerCase()]];
      return gbnfClass(excluded, true);
    }
    if (e === "b" || e === "B") this.#fail(`\\${e} (a word boundary)`);
    if (/[1-9k]/.test(e)) this.#fail("a backreference");
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, "0": 0 };
    let cp: number;
    if (e in simple) cp = simple[e];
    else if (e === "x" || e === "u") {
      const braced = e === "u" && p[this.#pos] === "{";
      const m = braced
        ? /^\{([0-9a-fA-F]{1,6})\}/.exec(p.slice(this.#pos))
        : new RegExp(`^[0-9a-fA-F]{${e === "x" ? 2 : 4}}`).exec(p.slice(this.#pos));
      if (m === null) this.#fail(`a malformed \\${e} escape`);
      this.#pos += m[0].length;
      cp = parseInt(m[1] ?? m[0], 16);
    } else if (/[a-zA-Z]/.test(e)) {
      this.#fail(`the escape \\${e}`);
    } else {
      cp = e.codePointAt(0)!;
    }
    return inClass ? [[cp, cp]] : gbnfLiteral(jsonEscaped(cp));
  }

  #class(): string {
    const p = this.pattern;
    this.#pos++;
    const negated = p[this.#pos] === "^";
    if (negated) this.#pos++;
    const ranges: Range[] = [];
    const single = (): Range[] => {
      if (p[this.#pos] === "\\") return this.#escape(true) as Range[];
      const cp = p.codePointAt(this.#pos)!;
      this.#pos += cp > 0xffff ? 2 : 1;
      return [[cp, cp]];
    };
    while (p[this.#pos] !== "]") {
      if (this.#pos >= p.length) this.#fail("an unterminated class");
      const first = single();
      if (
        p[this.#pos] === "-" && p[this.#pos + 1] !== "]" && first.length === 1 &&
        first[0][0] === first[0][1]
      ) {
        this.#pos++;
        const last = single();
        if (last.length !== 1 || last[0][0] !== last[0][1]) this.#fail("a range to a class");
        if (last[0][0] < first[0][0]) this.#fail("a range out of order");
        ranges.push([first[0][0], last[0][0]]);
      } else {
        ranges.push(...first);
      }
    }
    this.#pos++;
    if (negated) return gbnfClass([...DOT_EXCLUDED, ...ranges], true);
    if (ranges.length === 0) this.#fail("an empty class");
    return classOf(ranges);
  }

  #quantified(atom: string, limit: number): string {
    const p = this.pattern;
    if (this.#pos >= limit) return atom;
    const c = p[this.#pos];
    let q = "";
    if (c === "*" || c === "+" || c === "?") {
      q = c;
      this.#pos++;
    } else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(this.#pos));
      if (m === null) return atom;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === "" ? Infinity : Number(m[3]);
      if (min > MAX_REPEAT || (max !== Infinity && max > MAX_REPEAT)) {
        this.#fail(`a repetition above ${MAX_REPEAT}`);
      }
      if (max < min) this.#fail("a repetition out of order");
      q = max === Infinity ? `{${min},}` : max === min ? `{${min}}` : `{${min},${max}}`;
      this.#pos += m[0].length;
    } else {
      return atom;
    }
    // A lazy quantifier matches the same strings.
    if (p[this.#pos] === "?") this.#pos++;
    return `(${atom})${q}`;
  }
}
