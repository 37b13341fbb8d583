/**
 * Where a step's time goes, from what tests/gpu/profile.sh gathered: Nsight Compute's raw
 * CSV (one row per kernel: gpu__time_duration.sum, dram__bytes_read.sum), cut into steps at
 * each argmax_final (every profiled step ends with one) and named by profile.ts's step lines;
 * beside each step its wall time from the --time pass, so the time between kernels (launch
 * gaps, host work) shows as wall minus the kernels' sum.
 *
 *   deno run -A tests/gpu/profile_table.ts TIMES.jsonl STEPS.jsonl NCU.csv [TOP]
 */

export interface KernelRow {
  name: string;
  micros: number;
  bytesRead: number;
}

export interface StepProfile {
  model: string;
  step: string;
  kernels: KernelRow[];
}

/** Splits one CSV line (ncu quotes every field; quotes inside are doubled). */
export function csvFields(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') cur += '"', i++;
      else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") out.push(cur), cur = "";
    else cur += c;
  }
  out.push(cur);
  return out;
}

const SCALE: Record<string, number> = {
  ns: 1e-3,
  us: 1,
  ms: 1e3,
  s: 1e6,
  nsecond: 1e-3,
  usecond: 1,
  msecond: 1e3,
  second: 1e6,
  byte: 1,
  Kbyte: 1e3,
  Mbyte: 1e6,
  Gbyte: 1e9,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
};

/** The kernels of ncu's `--csv --page raw` output, in launch order (time in µs, bytes). */
export function parseNcuCsv(text: string): KernelRow[] {
  const lines = text.split("\n").filter((l) => l.startsWith('"'));
  const header = lines.findIndex((l) => l.includes('"Kernel Name"'));
  if (header < 0) throw new Error('no ncu CSV header (a "Kernel Name" column) found');
  const cols = csvFields(lines[header]);
  const at = (name: string): number => {
    const i = cols.indexOf(name);
    if (i < 0) throw new Error(`ncu CSV has no column ${name}`);
    return i;
  };
  const [id, kn, time, read] = [
    at("ID"),
    at("Kernel Name"),
    at("gpu__time_duration.sum"),
    at("dram__bytes_read.sum"),
  ];
  let units: string[] = [];
  const rows: KernelRow[] = [];
  for (const line of lines.slice(header + 1)) {
    const f = csvFields(line);
    if (f[id] === "") {
      units = f;
      continue;
    }
    const value = (i: number): number =>
      Number(f[i].replaceAll(",", "")) * (SCALE[units[i] ?? ""] ?? 1);
    rows.push({ name: f[kn], micros: value(time), bytesRead: value(read) });
  }
  return rows;
}

/** Cuts the kernel list after each argmax_final, naming the pieces in the steps' order. */
export function cutSteps(rows: KernelRow[], labels: [string, string][]): StepProfile[] {
  const steps: StepProfile[] = [];
  let kernels: KernelRow[] = [];
  for (const row of rows) {
    kernels.push(row);
    if (!row.name.startsWith("argmax_final")) continue;
    const [model, step] = labels[steps.length] ?? ["?", `step ${steps.length + 1}`];
    steps.push({ model, step, kernels });
    kernels = [];
  }
  if (kernels.length > 0) steps.push({ model: "?", step: "after the last argmax", kernels });
  return steps;
}

function lines(path: string): Record<string, unknown>[] {
  return Deno.readTextFileSync(path).split("\n").filter((l) => l.startsWith("{")).map((l) =>
    JSON.parse(l)
  );
}

function short(name: string): string {
  return name.length > 48 ? name.slice(0, 45) + "..." : name;
}

if (import.meta.main) {
  const [timesPath, stepsPath, csvPath, topArg] = Deno.args;
  const top = Number(topArg ?? 8);
  const wall = new Map<string, number>();
  for (const t of lines(timesPath)) wall.set(`${t.model}|${t.step}`, Number(t.ms));
  let steps: StepProfile[] = [];
  try {
    const labels: [string, string][] = lines(stepsPath).flatMap((m) =>
      (m.steps as string[]).map((s): [string, string] => [String(m.model), s])
    );
    steps = cutSteps(parseNcuCsv(Deno.readTextFileSync(csvPath)), labels);
  } catch (err) {
    // ncu cut short by its time limit, or absent: the timed pass still says something.
    console.log(`no kernel profile (${(err as Error).message}): the wall times alone`);
    console.log("| model | step | wall ms |");
    console.log("| --- | --- | ---: |");
    for (const [key, ms] of wall) console.log(`| ${key.replace("|", " | ")} | ${ms.toFixed(3)} |`);
  }
  if (steps.length > 0) {
    console.log(
      "| model | step | wall ms | kernels | kernel ms | outside kernels | MB read | GB/s in kernels |",
    );
    console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const s of steps) {
      const us = s.kernels.reduce((a, k) => a + k.micros, 0);
      const bytes = s.kernels.reduce((a, k) => a + k.bytesRead, 0);
      const ms = wall.get(`${s.model}|${s.step}`);
      console.log(
        `| ${s.model} | ${s.step} | ${ms?.toFixed(3) ?? "-"} | ${s.kernels.length} | ${
          (us / 1000).toFixed(3)
        } | ${ms === undefined ? "-" : (ms - us / 1000).toFixed(3)} | ${
          (bytes / 1e6).toFixed(1)
        } | ${(bytes / (us * 1e3)).toFixed(0)} |`,
      );
    }
  }
  for (const s of steps) {
    const by = new Map<string, { n: number; us: number; bytes: number }>();
    for (const k of s.kernels) {
      const e = by.get(k.name) ?? { n: 0, us: 0, bytes: 0 };
      e.n++, e.us += k.micros, e.bytes += k.bytesRead;
      by.set(k.name, e);
    }
    const total = s.kernels.reduce((a, k) => a + k.micros, 0);
    console.log(`\n${s.model}, ${s.step}: kernels by time`);
    console.log("| kernel | launches | us | share | us each | MB read | GB/s |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const [name, e] of [...by].sort((a, b) => b[1].us - a[1].us).slice(0, top)) {
      console.log(
        `| ${short(name)} | ${e.n} | ${e.us.toFixed(1)} | ${(100 * e.us / total).toFixed(1)}% | ${
          (e.us / e.n).toFixed(2)
        } | ${(e.bytes / 1e6).toFixed(2)} | ${(e.bytes / (e.us * 1e3)).toFixed(0)} |`,
      );
    }
  }
}
