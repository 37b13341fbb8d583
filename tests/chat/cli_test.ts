/** `neuron template` prints the prompt llama-server renders, byte for byte. */
import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { fixture, modelGolden } from "../fixtures.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const MODEL = fixture("qwen3-tiny-f16.gguf");

async function neuron(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-no-legacy-abort", MAIN, ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  return { code, out: new TextDecoder().decode(stdout), err: new TextDecoder().decode(stderr) };
}

const prompts = modelGolden("qwen3-tiny-f16").prompts;

Deno.test("template renders a request body with tools as the golden prompt", async () => {
  const prompt = prompts.find((p) => p.name === "chat_tool_result")!;
  const dir = await Deno.makeTempDir();
  try {
    const body = `${dir}/request.json`;
    await Deno.writeTextFile(
      body,
      JSON.stringify({ messages: prompt.messages, tools: prompt.tools }),
    );
    const { code, out } = await neuron(["template", "--model", MODEL, "--messages", body]);
    assertEquals(code, 0);
    assertEquals(out, prompt.text);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("template takes a messages array, --kwargs and --no-generation-prompt", async () => {
  const prompt = prompts.find((p) => p.name === "chat_no_think")!;
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/messages.json`;
    await Deno.writeTextFile(file, JSON.stringify(prompt.messages));
    const thinkingOff = await neuron([
      "template",
      "-m",
      MODEL,
      "--messages",
      file,
      "--kwargs",
      JSON.stringify(prompt.chat_template_kwargs),
    ]);
    assertEquals(thinkingOff.out, prompt.text);
    const noPrompt = await neuron([
      "template",
      "-m",
      MODEL,
      "--messages",
      file,
      "--no-generation-prompt",
    ]);
    assertEquals(noPrompt.out, "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n");
    await Deno.writeTextFile(file, JSON.stringify([{ role: "user", content: 42 }]));
    const bad = await neuron(["template", "-m", MODEL, "--messages", file]);
    assertEquals(bad.code, 1);
    assertStringIncludes(bad.err, "messages[0].content");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
