/**
 * `deno task bench:constrain [SCHEMA.json]`: what structured output costs per token and
 * sequence on the Qwen3 vocabulary (151,936 tokens), on the engine's own path: the
 * filter's `restrict` (the mask applied to a row of logits) plus `accept` (the grammar
 * state after the chosen token). Sequences pick their tokens from random logits, as a
 * model with random weights would, at temperature 1 over the allowed tokens (the time
 * includes copying the row into the sampler's buffer, which the mask shares a pass with,
 * and which unconstrained sampling also pays). The first sequence meets every grammar
 * state for the first time (cold: masks computed); the others mostly find them computed
 * (warm), as requests reusing an agent's schema do.
 * Also: the vocabulary trie's build, and the schema's compilation.
 */
import { fixture } from "../fixtures.ts";
import { openGguf, Rng } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";
import { Constraints } from "../../src/frontend/constraints.ts";
import { detectChatFormat } from "../../src/chat/mod.ts";

const DEFAULT_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 24 },
    age: { type: "integer", minimum: 0, maximum: 150 },
    email: { type: "string", format: "email" },
    tags: { type: "array", items: { enum: ["admin", "user", "guest"] }, maxItems: 3 },
    address: {
      type: "object",
      properties: { city: { type: "string" }, zip: { type: "string", pattern: "^[0-9]{5}$" } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
    note: { anyOf: [{ type: "string", maxLength: 40 }, { type: "null" }] },
    score: { type: "number" },
  },
  required: ["name", "age", "email", "tags", "address", "note", "score"],
  additionalProperties: false,
};

const SEQUENCES = 16;
const TOKENS = 160;

const schema = Deno.args[0] ? JSON.parse(Deno.readTextFileSync(Deno.args[0])) : DEFAULT_SCHEMA;
const file = openGguf(fixture("qwen3-vocab.gguf"));
const tok = loadTokenizer(file);
const constraints = new Constraints(tok, detectChatFormat(""));
const constraint = { text: { kind: "json" as const, schema } };

let t = performance.now();
constraints.filter({ text: { kind: "json" } }, null);
console.log(
  `vocabulary trie and JSON mode: ${(performance.now() - t).toFixed(0)} ms (once per model)`,
);
t = performance.now();
constraints.filter(constraint, null);
console.log(`schema compiled: ${(performance.now() - t).toFixed(1)} ms (once per schema)`);

const rng = new Rng(1);
const logits = new Float32Array(tok.size);
const row = new Float32Array(tok.size);
const cold: number[] = [];
const warm: number[] = [];
let finished = 0;
for (let s = 0; s < SEQUENCES; s++) {
  const filter = constraints.filter(constraint, null)!;
  for (let k = 0; k < TOKENS; k++) {
    for (let i = 0; i < row.length; i++) row[i] = rng.float() * 8;
    // As the sampler calls it: its copy of the row, masked in the same pass.
    const t0 = performance.now();
    const any = filter.restrict(logits, row);
    const t1 = performance.now();
    if (!any) break;
    // Temperature 1 over the allowed tokens.
    let total = 0;
    for (let i = 0; i < logits.length; i++) {
      if (logits[i] !== -Infinity) total += Math.exp(logits[i]);
    }
    let r = rng.float() * total;
    let pick = -1;
    for (let i = 0; i < logits.length && r > 0; i++) {
      if (logits[i] === -Infinity) continue;
      r -= Math.exp(logits[i]);
      pick = i;
    }
    if (tok.isEog(pick)) {
      finished++;
      break;
    }
    const t2 = performance.now();
    filter.accept(pick);
    const t3 = performance.now();
    (s === 0 ? cold : warm).push((t1 - t0 + t3 - t2) * 1000);
  }
}

// What sampling without a constraint pays for the same row: its copy alone.
const plain = new Float32Array(tok.size);
const copies: number[] = [];
for (let k = 0; k < 500; k++) {
  for (let i = 0; i < row.length; i++) row[i] = rng.float() * 8;
  const t0 = performance.now();
  plain.set(row);
  copies.push((performance.now() - t0) * 1000);
}

function report(name: string, us: number[]): void {
  const sorted = [...us].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const mean = us.reduce((a, b) => a + b, 0) / us.length;
  console.log(
    `| ${name} | ${us.length} | ${mean.toFixed(1)} | ${at(0.5).toFixed(1)} | ` +
      `${at(0.99).toFixed(1)} | ${sorted.at(-1)!.toFixed(1)} |`,
  );
}

console.log(`\n${SEQUENCES} sequences of up to ${TOKENS} tokens, ${finished} complete`);
console.log("| pass | tokens | mean µs | p50 µs | p99 µs | max µs |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
report("cold (first sequence)", cold);
report("warm (the others)", warm);
report("all", [...cold, ...warm]);
report("the row's copy alone", copies);
const mean = (us: number[]) => us.reduce((a, b) => a + b, 0) / us.length;
console.log(
  `\nthe constraint's own cost per token (all, less the copy): ` +
    `${(mean([...cold, ...warm]) - mean(copies)).toFixed(1)} µs mean`,
);
