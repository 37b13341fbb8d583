/**
 * The shape of src/: its folders, and its files, import each other without a cycle
 * (type-only imports count: a cycle of types still ties two concepts together), the layers
 * of a request's path import only downwards, and the engine core knows no text, no model
 * family and no tensor parallelism.
 */

import { assertEquals } from "../support/assert.ts";

const SRC = new URL("../../src/", import.meta.url).pathname;

/** The path of a request, top down: each folder imports only folders below it. */
const LAYERS = [
  "server",
  "harness",
  "openai",
  "frontend",
  "constrain",
  "engine",
  "runner",
  "tp",
  "models",
  "backend",
];

/** What the engine core must not see: text, tensor parallelism, a concrete family. */
const ENGINE_MAY_NOT_IMPORT = [/^chat\//, /^tokenizer\//, /^frontend\//, /^tp\//, /^models\/qwen3/];

interface Edge {
  from: string;
  to: string;
}

function sourceFiles(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const rel = prefix + e.name;
    if (e.isDirectory) out.push(...sourceFiles(`${dir}${e.name}/`, `${rel}/`));
    else if (rel.endsWith(".ts") && !rel.endsWith("_test.ts")) out.push(rel);
  }
  return out;
}

/** Every module a file names: static imports and re-exports (type-only too), dynamic ones. */
export function specifiers(text: string): string[] {
  const found: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
    /new\s+URL\(\s*["']([^"']+)["']\s*,\s*import\.meta\.url\s*\)/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) found.push(m[1]);
  return found;
}

/** File-level edges between files of src/ (paths relative to src/). */
function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of sourceFiles(SRC)) {
    const text = Deno.readTextFileSync(SRC + file);
    for (const spec of specifiers(text)) {
      if (!spec.startsWith(".")) continue;
      const target = new URL(spec, `file://${SRC}${file}`).pathname;
      if (target.startsWith(SRC)) out.push({ from: file, to: target.slice(SRC.length) });
    }
  }
  return out;
}

const folder = (path: string): string => path.split("/")[0];

/** The cycles between the nodes `nodeOf` puts files in, each with the file edges that close
 * it. */
function cyclesOf(all: Edge[], nodeOf: (path: string) => string): string[] {
  const graph = new Map<string, Map<string, Edge>>();
  for (const e of all) {
    const [a, b] = [nodeOf(e.from), nodeOf(e.to)];
    if (a === b) continue;
    if (!graph.has(a)) graph.set(a, new Map());
    if (!graph.get(a)!.has(b)) graph.get(a)!.set(b, e);
  }
  const cycles: string[] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node)?.keys() ?? []) {
      if (state.get(next) === "open") {
        const ring = [...stack.slice(stack.indexOf(next)), next];
        const why = ring.slice(0, -1).map((f, i) => {
          const e = graph.get(f)!.get(ring[i + 1])!;
          return `${e.from} -> ${e.to}`;
        });
        cycles.push(`${ring.join(" -> ")} (${why.join("; ")})`);
      } else if (!state.has(next)) {
        visit(next);
      }
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return cycles;
}

Deno.test("structure: no import cycle between the folders of src/", () => {
  assertEquals(cyclesOf(edges(), folder), []);
});

Deno.test("structure: no import cycle between the files of src/", () => {
  assertEquals(cyclesOf(edges(), (path) => path), []);
});

Deno.test("structure: a request's layers import only downwards", () => {
  const rank = (f: string): number => LAYERS.indexOf(f);
  const upwards = edges()
    .filter((e) => rank(folder(e.from)) >= 0 && rank(folder(e.to)) >= 0)
    .filter((e) => rank(folder(e.to)) < rank(folder(e.from)))
    .map((e) => `${e.from} -> ${e.to}`);
  assertEquals(upwards, []);
});

Deno.test("structure: the engine core imports no text, no family, no tensor parallelism", () => {
  const seen = edges()
    .filter((e) => folder(e.from) === "engine")
    .filter((e) => ENGINE_MAY_NOT_IMPORT.some((re) => re.test(e.to)))
    .map((e) => `${e.from} -> ${e.to}`);
  assertEquals(seen, []);
});

Deno.test("structure: the import reader sees every form an import takes", () => {
  const text = [
    'import { a } from "./a.ts";',
    "import type {",
    "  B,",
    '} from "../b/b.ts";',
    'export { c } from "./c.ts";',
    'export type * from "./d.ts";',
    'import "./e.ts";',
    'const f = await import("./f.ts");',
    'new Worker(new URL("./g.ts", import.meta.url));',
    'import table from "./h.json" with { type: "json" };',
    "// a comment that says from where is not an import",
  ].join("\n");
  assertEquals(specifiers(text).sort(), [
    "../b/b.ts",
    "./a.ts",
    "./c.ts",
    "./d.ts",
    "./e.ts",
    "./f.ts",
    "./g.ts",
    "./h.json",
  ]);
});
