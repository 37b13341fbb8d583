/** `neuron tokenize` and `neuron detokenize` as people and scripts run them. */
import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const VOCAB = fixture("qwen3-vocab.gguf");

async function neuron(
  args: string[],
  stdin?: string,
): Promise<{ code: number; out: Uint8Array; err: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", MAIN, ...args],
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const { code, stdout, stderr } = await child.output();
  return { code, out: stdout, err: new TextDecoder().decode(stderr) };
}

const TEXT = "text<|im_end|>more 世界 🎉";
const IDS_SPECIAL = [1318, 151645, 6384, 220, 99489, 11162, 236, 231];

Deno.test("tokenize --json prints the ids and pieces", async () => {
  const { code, out } = await neuron(["tokenize", "--model", VOCAB, "--special", "--json", TEXT]);
  assertEquals(code, 0);
  const result = JSON.parse(new TextDecoder().decode(out));
  assertEquals(result.ids, IDS_SPECIAL);
  assertEquals(result.pieces.slice(0, 5), ["text", "<|im_end|>", "more", " ", "世界"]);
});

Deno.test("tokenize reads standard input and prints one id and piece per line", async () => {
  const { code, out } = await neuron(["tokenize", "-m", VOCAB, "-"], "Hello world");
  assertEquals(code, 0);
  assertEquals(new TextDecoder().decode(out), '9707\t"Hello"\n1879\t" world"\n');
});

Deno.test("tokenize keeps a leading U+FEFF from standard input, as llama.cpp does", async () => {
  const { code, out } = await neuron(["tokenize", "-m", VOCAB, "--json", "-"], "\uFEFFHello");
  assertEquals(code, 0);
  assertEquals(JSON.parse(new TextDecoder().decode(out)).ids, [3225, 9707]);
});

Deno.test("detokenize prints the text byte for byte", async () => {
  const { code, out } = await neuron(["detokenize", "--model", VOCAB, IDS_SPECIAL.join(",")]);
  assertEquals(code, 0);
  assertEquals(out, new TextEncoder().encode(TEXT));
  const skipped = await neuron([
    "detokenize",
    "-m",
    VOCAB,
    "--skip-special",
    "1318 151645",
    "6384",
  ]);
  assertEquals(new TextDecoder().decode(skipped.out), "textmore");
});

Deno.test("bad ids and missing options fail with a message and an exit code", async () => {
  const bad = await neuron(["detokenize", "--model", VOCAB, "1,151936"]);
  assertEquals(bad.code, 1);
  assertStringIncludes(bad.err, "outside the vocabulary");
  const usage = await neuron(["tokenize", "hello"]);
  assertEquals(usage.code, 2);
  assertStringIncludes(usage.err, "--model is required");
  const word = await neuron(["detokenize", "-m", VOCAB, "12,abc"]);
  assertEquals(word.code, 2);
});
