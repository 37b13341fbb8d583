/**
 * A strict reader of the Prometheus text exposition format (0.0.4), enough to prove that a
 * scraper will accept what /metrics serves: HELP/TYPE comments, sample lines with escaped
 * label values, TYPE before samples, each family's samples together, histogram buckets
 * cumulative with a +Inf bucket equal to _count.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseValue(s: string, line: string): number {
  if (s === "+Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  if (s === "NaN") return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new Error(`bad value in: ${line}`);
  return Number(s);
}

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf("=", i);
    if (eq < 0) throw new Error(`bad labels in: ${line}`);
    const key = text.slice(i, eq);
    if (!LABEL.test(key)) throw new Error(`bad label name ${key} in: ${line}`);
    if (text[eq + 1] !== '"') throw new Error(`unquoted label value in: ${line}`);
    let j = eq + 2;
    let value = "";
    for (; j < text.length && text[j] !== '"'; j++) {
      if (text[j] === "\\") {
        const next = text[++j];
        if (next === "n") value += "\n";
        else if (next === "\\" || next === '"') value += next;
        else throw new Error(`bad escape in: ${line}`);
      } else {
        value += text[j];
      }
    }
    if (text[j] !== '"') throw new Error(`unterminated label value in: ${line}`);
    if (Object.hasOwn(labels, key)) throw new Error(`duplicate label ${key} in: ${line}`);
    labels[key] = value;
    i = j + 1;
    if (text[i] === ",") i++;
    else if (i < text.length) throw new Error(`expected , in: ${line}`);
  }
  return labels;
}

function familyOf(sample: string, families: Map<string, Family>): Family | undefined {
  for (const suffix of ["", "_bucket", "_sum", "_count"]) {
    if (suffix && !sample.endsWith(suffix)) continue;
    const f = families.get(sample.slice(0, sample.length - suffix.length));
    if (f && (suffix === "" || f.type === "histogram" || f.type === "summary")) return f;
  }
  return undefined;
}

export function parsePrometheus(text: string): Map<string, Family> {
  if (!text.endsWith("\n")) throw new Error("exposition must end with a newline");
  const families = new Map<string, Family>();
  const closed = new Set<string>();
  let current: Family | undefined;
  for (const line of text.slice(0, -1).split("\n")) {
    if (line === "") continue;
    const comment = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (comment) {
      const [, kind, name, rest] = comment;
      if (!NAME.test(name)) throw new Error(`bad metric name: ${line}`);
      let f = families.get(name);
      if (!f) {
        if (closed.has(name)) throw new Error(`family ${name} split: ${line}`);
        f = { name, type: "untyped", help: "", samples: [] };
        families.set(name, f);
      }
      if (kind === "TYPE") {
        if (!TYPES.has(rest)) throw new Error(`bad type: ${line}`);
        if (f.samples.length) throw new Error(`TYPE after samples: ${line}`);
        f.type = rest;
      } else {
        f.help = rest;
      }
      if (current && current !== f) closed.add(current.name);
      current = f;
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const f = familyOf(m[1], families);
    if (!f) throw new Error(`sample without TYPE: ${line}`);
    if (f !== current) throw new Error(`sample outside its family block: ${line}`);
    f.samples.push({
      name: m[1],
      labels: m[3] ? parseLabels(m[3], line) : {},
      value: parseValue(m[4], line),
    });
  }
  for (const f of families.values()) if (f.type === "histogram") checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, Sample[]>();
  for (const s of f.samples) {
    const { le: _, ...rest } = s.labels;
    const key = JSON.stringify(rest);
    series.set(key, [...(series.get(key) ?? []), s]);
  }
  for (const [key, samples] of series) {
    const buckets = samples.filter((s) => s.name === `${f.name}_bucket`);
    const count = samples.find((s) => s.name === `${f.name}_count`);
    if (!count || !samples.some((s) => s.name === `${f.name}_sum`)) {
      throw new Error(`${f.name}${key}: histogram without _sum/_count`);
    }
    let prev = -Infinity;
    let prevCount = 0;
    for (const b of buckets) {
      const le = parseValue(b.labels.le ?? "", b.name);
      if (!(le > prev)) throw new Error(`${f.name}${key}: buckets not increasing`);
      if (b.value < prevCount) throw new Error(`${f.name}${key}: buckets not cumulative`);
      prev = le;
      prevCount = b.value;
    }
    if (prev !== Infinity || prevCount !== count.value) {
      throw new Error(`${f.name}${key}: +Inf bucket must exist and equal _count`);
    }
  }
}
