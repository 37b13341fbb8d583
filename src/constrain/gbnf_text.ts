/** Writing GBNF text: literals and character classes with every special character escaped. */

function escapeChar(cp: number, inClass: boolean): string {
  const c = String.fromCodePoint(cp);
  if (c === "\n") return "\\n";
  if (c === "\r") return "\\r";
  if (c === "\t") return "\\t";
  if (c === "\\" || c === '"') return `\\${c}`;
  if (inClass && (c === "]" || c === "[" || c === "-" || c === "^")) {
    return `\\x${cp.toString(16).padStart(2, "0")}`;
  }
  if (cp < 0x20 || cp === 0x7f) return `\\x${cp.toString(16).padStart(2, "0")}`;
  return c;
}

/** `text` as a GBNF literal. */
export function gbnfLiteral(text: string): string {
  let out = '"';
  for (const ch of text) out += escapeChar(ch.codePointAt(0)!, false);
  return out + '"';
}

/** A GBNF class of the code-point ranges (negated: every character but them). */
export function gbnfClass(
  ranges: ReadonlyArray<readonly [number, number]>,
  negated = false,
): string {
  let out = negated ? "[^" : "[";
  for (const [lo, hi] of ranges) {
    out += escapeChar(lo, true);
    if (hi > lo) out += "-" + escapeChar(hi, true);
  }
  return out + "]";
}

/** A character a JSON string may hold as it is: not `"`, `\`, nor a control character. */
export const JSON_PLAIN_EXCLUDED: ReadonlyArray<readonly [number, number]> = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x7f, 0x7f],
];
