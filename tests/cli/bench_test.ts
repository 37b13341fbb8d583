/** `neuron bench`'s command line: what it refuses before measuring anything. */
import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { runNeuron } from "../support/processes.ts";
import { fixture } from "../fixtures.ts";

const MODEL = fixture("qwen3-tiny-q8_0.gguf");

Deno.test("bench: --quant goes with --synthetic only, and an unknown one is refused", async () => {
  const cases: [string[], string][] = [
    [["--model", MODEL, "--quant", "q9"], "--quant"],
    [["--model", MODEL, "--quant", "q4_k_m"], "--quant"],
    [["--synthetic", "qwen3-0.6b", "--quant", "q9"], 'unknown quantization "q9"'],
    [["--model", MODEL, "--synthetic", "qwen3-0.6b"], "either --model or --synthetic"],
  ];
  for (const [args, text] of cases) {
    const r = await runNeuron(["bench", "-p", "1", "-n", "1", "-r", "1", ...args]);
    assertEquals(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assertStringIncludes(r.stderr, text);
    assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});
