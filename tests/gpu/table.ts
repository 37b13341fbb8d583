/**
 * The one table tests/gpu/run.sh ends with: the preflight verdicts, every GPU test's result
 * (from `deno test` logs), then each bench number next to its bandwidth roofline (from
 * tests/gpu/bench.ts --json). A part whose input is missing says so in its row, so a
 * run that skipped something still shows what it skipped.
 *
 *   deno run -A tests/gpu/table.ts --preflight P.json --bench B.json [--bench B2.json] LOG...
 */

import { parseArgs } from "node:util";
import type { Preflight } from "./preflight.ts";
import type { GridPoint } from "./decode_grid.ts";

interface BenchResult {
  model: string;
  pp: number;
  ppTokens: number;
  tg: number;
  tgTokens: number;
  bandwidthGBs: number;
  bytesPerToken: number;
  /** tg with the logits row read back and picked on the host; picked on the device under a mask. */
  tgHostArgmax?: number;
  tgMasked?: number;
  /** A speculative verification step of k + 1 rows of one sequence against a 1-row step. */
  verify?: { k: number; stepRatio: number };
  grid?: GridPoint[];
  /** Decode after a context of `depth` (one stream): bench.ts --depth, where it has it. */
  depths?: Array<{ depth: number; tg: number; tgTokens: number; bytesPerToken: number }>;
}

export type Row = [string, string, string];

/** `name ... ok (12ms)` lines of deno test output, in order, one row per test. */
export function testRows(log: string, label: string): Row[] {
  const rows: Row[] = [];
  for (const line of log.split("\n")) {
    const m = /^(\S.*?) \.\.\. (ok|FAILED|ignored)(?: \((.+)\))?\s*$/.exec(line);
    if (m) rows.push([`${label}: ${m[1]}`, m[3] ? `${m[2]} (${m[3]})` : m[2], ""]);
  }
  return rows;
}

const rate = (v: number): string => `${v >= 100 ? v.toFixed(0) : v.toFixed(1)} tok/s`;
const against = (v: number, roof: number): string =>
  `${rate(roof)} (${((100 * v) / roof).toFixed(0)}%)`;

/** Rows of one bench pass; `base`: also pp and tg (a later pass has only its contexts). */
export function benchRows(results: BenchResult[], base = true): Row[] {
  const rows: Row[] = [];
  for (const r of results) {
    const bw = r.bandwidthGBs * 1e9;
    const weightRoof = (r.ppTokens * bw) / r.bytesPerToken;
    if (base) {
      rows.push([`${r.model} prefill pp${r.ppTokens}`, rate(r.pp), against(r.pp, weightRoof)]);
      rows.push([
        `${r.model} decode tg${r.tgTokens}, 1 stream`,
        rate(r.tg),
        against(r.tg, bw / r.bytesPerToken),
      ]);
      if (r.tgHostArgmax !== undefined && r.tgMasked !== undefined) {
        const roof = bw / r.bytesPerToken;
        rows.push([
          `${r.model} tg, logits read back`,
          rate(r.tgHostArgmax),
          against(r.tgHostArgmax, roof),
        ]);
        rows.push([
          `${r.model} tg, picked under a mask`,
          rate(r.tgMasked),
          against(r.tgMasked, roof),
        ]);
      }
      if (r.verify !== undefined) {
        rows.push([
          `${r.model} verification of k=${r.verify.k} (${r.verify.k + 1} rows) / 1-row step`,
          `${r.verify.stepRatio.toFixed(2)}x`,
          "",
        ]);
      }
    }
    for (const d of r.depths ?? []) {
      rows.push([
        `${r.model} decode tg${d.tgTokens} after ${d.depth} context, 1 stream`,
        rate(d.tg),
        against(d.tg, bw / d.bytesPerToken),
      ]);
    }
    for (const p of r.grid ?? []) {
      if (p.context > 0 && p.streams === Math.min(...r.grid!.map((q) => q.streams))) {
        rows.push([
          `${r.model} prefill to ${p.context} context`,
          rate(p.prefillTokS),
          against(p.prefillTokS, p.prefillRoofline),
        ]);
      }
      rows.push([
        `${r.model} decode, ${p.streams} stream${p.streams > 1 ? "s" : ""}, ${p.context} context`,
        rate(p.decodeTokS),
        against(p.decodeTokS, p.decodeRoofline),
      ]);
    }
  }
  return rows;
}

export function render(rows: Row[]): string {
  const lines = ["| what | result | roofline (share reached) |", "| --- | --- | --- |"];
  for (const r of rows) lines.push(`| ${r.map((c) => c.replaceAll("|", "/")).join(" | ")} |`);
  return lines.join("\n");
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    allowPositionals: true,
    options: { preflight: { type: "string" }, bench: { type: "string", multiple: true } },
  });
  const read = (path: string | undefined): string | null => {
    if (!path) return null;
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return null;
    }
  };
  const rows: Row[] = [];
  const pre = read(values.preflight);
  if (pre === null) rows.push(["preflight", "missing", ""]);
  else {
    const p = JSON.parse(pre) as Preflight;
    rows.push(["preflight: driver vs PTX", `${p.driver.verdict}: ${p.driver.text}`, ""]);
    rows.push(["preflight: libcublas", `${p.cublas.verdict}: ${p.cublas.text}`, ""]);
    rows.push(["preflight: libnccl", `${p.nccl.verdict}: ${p.nccl.text}`, ""]);
  }
  for (const path of positionals) {
    const log = read(path);
    const label = path.replace(/^.*\//, "").replace(/\.log$/, "");
    const found = log === null ? [] : testRows(log, label);
    const none: Row = [label, log === null ? "not run" : "no tests", ""];
    rows.push(...(found.length > 0 ? found : [none]));
  }
  const benches = values.bench ?? [];
  if (benches.length === 0) rows.push(["bench", "not run", ""]);
  benches.forEach((path, i) => {
    const bench = read(path);
    if (bench === null) {
      rows.push([`bench ${path}`, "no results (cut short before a model ended)", ""]);
    } else rows.push(...benchRows(JSON.parse(bench) as BenchResult[], i === 0));
  });
  console.log(render(rows));
}
