/** `neuron generate` as a user runs it: the text, then each step's best logits, then speeds. */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { ROOT } from "../support/processes.ts";
import { familyFixture, fixture, modelGolden } from "../fixtures.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";

const MODEL = fixture("qwen3-tiny-q8_0.gguf");
const PROMPT = modelGolden("qwen3-tiny-q8_0").prompts.find((p) => p.name === "text_fox")!;
const STEPS = 4;

/** `neuron generate` on the fixture prompt, greedy past end-of-generation, and `extra`. */
function generateArgs(steps: number, ...extra: string[]): string[] {
  return [
    "generate",
    "-m",
    MODEL,
    "--device",
    "cpu",
    "--tokens",
    PROMPT.tokens.join(","),
    "-n",
    String(steps),
    "--ignore-eos",
    ...extra,
  ];
}

/**
 * Runs neuron with stdout and stderr on one pipe, in the order they were written. Structured
 * log lines are dropped: what they say depends on the machine (huge pages, say), not on generate.
 */
async function terminalOutput(args: string[]): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command("sh", {
    args: [
      "-c",
      'exec "$@" 2>&1',
      "sh",
      Deno.execPath(),
      "run",
      "-A",
      "--unstable-no-legacy-abort",
      `${ROOT}main.ts`,
      ...args,
    ],
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
  }).output();
  const lines = new TextDecoder().decode(out.stdout).split("\n");
  const output = lines.filter((line) => !line.startsWith('{"ts":')).join("\n");
  return { code: out.code, output };
}

function decode(ids: number[]): string {
  const file = openGguf(MODEL);
  try {
    return loadTokenizer(file).decode(ids);
  } finally {
    file.close();
  }
}

Deno.test("generate --top-logits: the whole text first, then each step's logits, then speeds", async () => {
  const { code, output } = await terminalOutput(generateArgs(STEPS, "--top-logits", "3"));
  assertEquals(code, 0, output);
  const greedy = PROMPT.greedy.slice(0, STEPS).map((s) => s.id);
  const text = decode(greedy);
  assert(output.startsWith(`${text}\n`), `the text comes first and whole:\n${output}`);
  const lines = output.slice(text.length + 1).trimEnd().split("\n");
  assertEquals(lines.length, STEPS + 2, output);
  lines.slice(0, STEPS).forEach((line, i) => {
    assertMatch(line, new RegExp(`^step ${i}: ${greedy[i]} \\| ${greedy[i]}:[\\d.-]+ \\d+:`));
  });
  assertMatch(
    lines[STEPS],
    new RegExp(`^prompt: ${PROMPT.tokens.length} tokens in [\\d.]+ ms, [\\d.]+ tokens/s$`),
  );
  assertMatch(
    lines[STEPS + 1],
    new RegExp(
      `^generation: ${STEPS} tokens, ${STEPS - 1} decode steps in [\\d.]+ ms, ` +
        `[\\d.]+ tokens/s$`,
    ),
  );
});

Deno.test("generate --json keeps its one JSON line on stdout; the speeds go to stderr", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--unstable-no-legacy-abort",
      `${ROOT}main.ts`,
      ...generateArgs(2, "--top-logits", "2", "--json"),
    ],
    env: { NO_COLOR: "1" },
    stdin: "null",
  }).output();
  assertEquals(out.code, 0);
  const stdout = new TextDecoder().decode(out.stdout);
  assertEquals(stdout.split("\n").length, 2, stdout);
  const result = JSON.parse(stdout);
  assertEquals(Object.keys(result), ["ids", "text", "steps"]);
  assertEquals(result.ids, PROMPT.greedy.slice(0, 2).map((s) => s.id));
  assertEquals(result.steps.map((s: { top: unknown[] }) => s.top.length), [2, 2]);
  const stderr = new TextDecoder().decode(out.stderr);
  assertMatch(stderr, /^prompt: \d+ tokens in .* tokens\/s$/m);
  assertMatch(stderr, /^generation: 2 tokens, 1 decode steps in .* tokens\/s$/m);
});

Deno.test("generate --json on a Gemma 3 file: llama.cpp's greedy tokens for the same prompt", async () => {
  const path = await familyFixture("gemma3", "q8_0");
  const prompt = "The quick brown fox jumps over the lazy dog.";
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--unstable-no-legacy-abort",
      `${ROOT}main.ts`,
      "generate",
      "--model",
      path,
      "--prompt",
      prompt,
      "-n",
      "8",
      "--ignore-eos",
      "--json",
    ],
    env: { NO_COLOR: "1" },
    stdin: "null",
  }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
  const result = JSON.parse(new TextDecoder().decode(out.stdout));
  using ref = await openLlamaModel(path);
  const ids = ref.tokenize(prompt, { special: true, addSpecial: true });
  assertEquals(result.ids, ref.greedy(ids, 8).map((s) => s.id));
  assertEquals(result.text, ref.detokenize(result.ids));
});
