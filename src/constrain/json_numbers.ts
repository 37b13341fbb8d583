/**
 * Integers within bounds as GBNF: the decimal numerals of [lo, hi] (either end may be
 * open), no leading zeros, no `-0`. Each length of numeral is split the usual way into
 * ranges fixed in their first digits and free after them, so the grammar is linear in
 * the number of digits. Bounded numerals have at most 15 digits, which doubles (what JSON
 * numbers are read into) hold exactly.
 */

const MAX_DIGITS = 15;
const LIMIT = 10 ** MAX_DIGITS - 1;

function digitClass(lo: number, hi: number): string {
  return lo === hi ? `"${lo}"` : `[${lo}-${hi}]`;
}

/** Numerals of exactly x.length digits from x to y (same length, x <= y). */
function sameLength(x: string, y: string): string {
  if (x.length === 0) return "";
  if (x === y) return `"${x}"`;
  if (x.length === 1) return digitClass(+x, +y);
  if (x[0] === y[0]) return `"${x[0]}" ${sameLength(x.slice(1), y.slice(1))}`;
  const rest = x.length - 1;
  const parts: string[] = [];
  let low = +x[0];
  let high = +y[0];
  if (!/^0*$/.test(x.slice(1))) {
    parts.push(`"${x[0]}" (${sameLength(x.slice(1), "9".repeat(rest))})`);
    low++;
  }
  if (!/^9*$/.test(y.slice(1))) {
    parts.push(`"${y[0]}" (${sameLength("0".repeat(rest), y.slice(1))})`);
    high--;
  }
  if (low <= high) parts.unshift(`${digitClass(low, high)} [0-9]{${rest}}`);
  return parts.length === 1 ? parts[0] : `(${parts.join(" | ")})`;
}

/** Numerals of the non-negative integers [a, b]. */
function nonNegative(a: number, b: number): string[] {
  const out: string[] = [];
  for (let d = String(a).length; d <= String(b).length; d++) {
    const lo = Math.max(a, d === 1 ? 0 : 10 ** (d - 1));
    const hi = Math.min(b, 10 ** d - 1);
    if (lo <= hi) out.push(sameLength(String(lo), String(hi)));
  }
  return out;
}

/**
 * A GBNF expression for the integers in [lo, hi]; ±Infinity leaves an end open (up to 15
 * digits). Null when the range is empty.
 */
export function integerRange(lo: number, hi: number): string | null {
  const a = Math.max(Math.ceil(lo), -LIMIT);
  const b = Math.min(Math.floor(hi), LIMIT);
  if (a > b) return null;
  const parts: string[] = [];
  if (a < 0) {
    const negatives = nonNegative(Math.max(1, -b), -a);
    parts.push(`"-" ${negatives.length === 1 ? negatives[0] : `(${negatives.join(" | ")})`}`);
  }
  if (b >= 0) parts.push(...nonNegative(Math.max(0, a), b));
  return parts.length === 1 ? parts[0] : `(${parts.join(" | ")})`;
}
