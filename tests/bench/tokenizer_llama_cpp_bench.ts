/**
 * Part of `deno task bench:tokenizer`: encoding speed of neuron's tokenizer beside llama.cpp's
 * own (the live reference, tests/support/llama_ref.ts), measured in the same run on the
 * vocabulary of every fixture family, on the golden corpus and on a 1 MB text made from it,
 * with the ids compared. SentencePiece vocabularies (Mistral, Gemma 3) are the point: the
 * byte-level BPE ones are here for scale.
 */
import { FAMILIES, familyFixture, fixture } from "../fixtures.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";

const MB = 1e6;
const utf8 = new TextEncoder();
const cases: { text: string }[] = JSON.parse(
  Deno.readTextFileSync(fixture("golden/tokenizer.json")),
).cases;

/** Best throughput in MB/s of `runs` timed passes over `texts` (after one warm-up pass). */
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

const same = (a: number[], b: number[]): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i]);

const corpus = Array.from({ length: 20 }, () => cases.map((c) => c.text)).flat();
let seed = 2024;
let big = "";
while (utf8.encode(big).length < MB) {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  big += cases[(seed >>> 8) % cases.length].text + (seed % 4 === 0 ? "\n" : " ");
}

const fmt = (x: number): string => x.toFixed(2);
let mismatches = 0;
console.log("tokenizer benchmark: neuron beside llama.cpp, parse special, no BOS");
for (const family of FAMILIES) {
  const path = await familyFixture(family, "q8_0");
  using ref = await openLlamaModel(path, { vocabOnly: true });
  const file = openGguf(path);
  const t = performance.now();
  const tok = loadTokenizer(file);
  const loadMs = performance.now() - t;
  const ours = (text: string): number[] => tok.encode(text, { parseSpecial: true });
  const theirs = (text: string): number[] =>
    ref.tokenize(text, { special: true, addSpecial: false });

  const differing = cases.filter((c) => !same(ours(c.text), theirs(c.text))).length;
  const corpusOurs = throughput(ours, corpus, 3);
  const corpusTheirs = throughput(theirs, corpus, 3);
  const bigOurs = throughput(ours, [big], 3);
  const bigTheirs = throughput(theirs, [big], 3);
  const bigSame = same(ours(big), theirs(big));
  mismatches += differing + (bigSame ? 0 : 1);
  console.log(
    `${family} (${tok.size} tokens, tables ${loadMs.toFixed(0)} ms): corpus neuron ${
      fmt(corpusOurs)
    } MB/s, llama.cpp ${fmt(corpusTheirs)} MB/s (${fmt(corpusOurs / corpusTheirs)}x); 1 MB ` +
      `neuron ${fmt(bigOurs)} MB/s, llama.cpp ${fmt(bigTheirs)} MB/s (${
        fmt(bigOurs / bigTheirs)
      }x); ids differ on ${differing}/${cases.length} strings, 1 MB ${
        bigSame ? "same" : "DIFFERS"
      }`,
  );
  file.close();
}
if (mismatches > 0) Deno.exit(1);
