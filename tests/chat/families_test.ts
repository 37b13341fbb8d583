/**
 * The chat templates of Llama 3.1, Mistral v0.3, Qwen2.5 and Gemma 3 (tests/chat/templates/)
 * against llama.cpp:
 * - every conversation (plain, system, multi-turn, tools, tool results, replayed tool calls,
 *   untrimmed and non-ASCII text) renders byte for byte as llama.cpp's own Jinja engine
 *   renders the template with the same variables, and a conversation the template refuses
 *   is refused by both, for the same reason;
 * - plain chats come out as llama_chat_apply_template's built-in renderer of the family
 *   (after the differences its templates document: Llama 3.1's date header, Qwen2.5's
 *   default system prompt, Mistral's system message on the last user turn), BOS dropped
 *   where the tokenizer adds it;
 * - tools appear in the form each template documents;
 * - a tool call a template replays is read back by the family's parser as the same call.
 */

import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { llamaJinja } from "../support/llama_jinja.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { fixture } from "../fixtures.ts";
import { FAMILIES, type Family, realTemplateOf } from "./templates/mod.ts";
import {
  type ChatMessage,
  ChatTemplate,
  detectChatFormat,
  parseMessages,
  parseOutput,
  parseTools,
} from "../../src/chat/mod.ts";
import { ChatError } from "../../src/chat/mod.ts";

const NOW = new Date(2024, 6, 26, 10, 30);
const SYSTEM = "You are a helpful assistant.";

const TOOLS = parseTools([
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Température actuelle d'une ville, en °C",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", description: "Ville, p. ex. « Zürich »" },
          days: { type: "integer", minimum: 1 },
        },
        required: ["city"],
      },
    },
  },
  { type: "function", function: { name: "now", parameters: { type: "object", properties: {} } } },
]);

const CALL = {
  id: "abcDEF123",
  type: "function" as const,
  function: { name: "get_weather", arguments: '{"city": "Paris", "days": 2}' },
};

const CONVERSATIONS: Record<string, { messages: unknown[]; tools?: boolean }> = {
  plain: { messages: [{ role: "user", content: "Hello" }] },
  system: { messages: [{ role: "system", content: SYSTEM }, { role: "user", content: "Hello" }] },
  multi: {
    messages: [
      { role: "user", content: "Hello" },
      { role: "assistant", content: "Hi there" },
      { role: "user", content: "Who are you?" },
    ],
  },
  multiSystem: {
    messages: [
      { role: "system", content: SYSTEM },
      { role: "user", content: "Hello" },
      { role: "assistant", content: "Hi there" },
      { role: "user", content: "Who are you?" },
    ],
  },
  untrimmed: {
    messages: [
      { role: "user", content: "  Grüße 👋🏽 \n" },
      { role: "assistant", content: "\n Hallo! " },
      { role: "user", content: 'déjà vu «quoted» "x" \\ {{ not jinja }}' },
    ],
  },
  tools: { messages: [{ role: "user", content: "Weather in Paris?" }], tools: true },
  toolsSystem: {
    messages: [{ role: "system", content: SYSTEM }, { role: "user", content: "Weather?" }],
    tools: true,
  },
  toolResult: {
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [CALL] },
      { role: "tool", tool_call_id: "abcDEF123", content: '{"temperature": 18}' },
      { role: "assistant", content: "It is 18 °C." },
      { role: "user", content: "Thanks!" },
    ],
    tools: true,
  },
  twoCalls: {
    messages: [
      { role: "user", content: "Weather and time?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [CALL, {
          id: "Zz9Zz9Zz9",
          type: "function",
          function: { name: "now", arguments: {} },
        }],
      },
      { role: "tool", tool_call_id: "abcDEF123", content: "18" },
      { role: "tool", tool_call_id: "Zz9Zz9Zz9", content: "10:30" },
    ],
    tools: true,
  },
  roles: {
    messages: [
      { role: "user", content: "a" },
      { role: "user", content: "b" },
    ],
  },
};

function template(family: Family, dropBos = false): ChatTemplate {
  const { source, bosToken, eosToken, addBos } = realTemplateOf(family);
  return new ChatTemplate(source, { bosToken, eosToken, addBos: dropBos && addBos });
}

function conversation(name: string): { messages: ChatMessage[]; tools?: typeof TOOLS } {
  const c = CONVERSATIONS[name];
  return { messages: parseMessages(c.messages), tools: c.tools ? TOOLS : undefined };
}

type Ours = { ok: true; text: string } | { ok: false; reason: string };

function ours(t: ChatTemplate, name: string): Ours {
  const { messages, tools } = conversation(name);
  try {
    return { ok: true, text: t.render(messages, { tools, now: NOW }) };
  } catch (err) {
    if (!(err instanceof ChatError)) throw err;
    return { ok: false, reason: (err.cause as Error | undefined)?.message ?? err.message };
  }
}

Deno.test("the families' templates render as llama.cpp's Jinja engine renders them", async () => {
  const cases = FAMILIES.flatMap((family) =>
    Object.keys(CONVERSATIONS).map((name) => ({ family, name, t: template(family) }))
  );
  const theirs = await llamaJinja(cases.map(({ t, name }) => {
    const { messages, tools } = conversation(name);
    return { template: t.source, variables: t.variables(messages, { tools, now: NOW }) };
  }));
  const refused: string[] = [];
  cases.forEach(({ family, name, t }, i) => {
    const mine = ours(t, name);
    const ref = theirs[i];
    const what = `${family} ${name}`;
    if (ref.ok) {
      assert(mine.ok, `${what}: llama.cpp renders it, neuron refuses: ${!mine.ok && mine.reason}`);
      assertEquals(mine.text, ref.text, what);
    } else {
      assert(!mine.ok, `${what}: llama.cpp refuses it (${ref.error}), neuron renders it`);
      assertStringIncludes(ref.error, `Jinja Exception: ${mine.reason}`, what);
      refused.push(what);
    }
  });
  // Gemma 3 has no tool turns; Llama 3.1 takes one call at a time; Mistral and Gemma want
  // alternating roles.
  assertEquals(refused.sort(), [
    "gemma3 roles",
    "gemma3 toolResult",
    "gemma3 twoCalls",
    "llama3.1 twoCalls",
    "mistral-v0.3 roles",
  ]);
});

/** The messages of a plain conversation as llama_chat_apply_template takes them. */
function plain(name: string): { role: string; content: string }[] {
  return conversation(name).messages.map((m) => ({ role: m.role, content: String(m.content) }));
}

Deno.test("plain chats come out as llama_chat_apply_template's built-in renderers", async () => {
  using vocab = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  const builtin = (family: Family, messages: { role: string; content: string }[]): string =>
    vocab.chatTemplate(messages, { template: realTemplateOf(family).source });
  const without = (role: string) => (m: { role: string }) => m.role !== role;
  for (const name of ["plain", "system", "multi", "multiSystem"]) {
    const messages = plain(name);
    const system = messages.find((m) => m.role === "system");
    const render = (family: Family): string => {
      const out = ours(template(family, true), name);
      assert(out.ok, `${family} ${name}`);
      return out.text;
    };
    assertEquals(render("gemma3"), builtin("gemma3", messages), `gemma3 ${name}`);
    assertEquals(
      render("qwen2.5"),
      (system ? "" : "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. " +
        "You are a helpful assistant.<|im_end|>\n") + builtin("qwen2.5", messages),
      `qwen2.5 ${name}`,
    );
    assertEquals(
      render("llama3.1"),
      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n" +
        `Today Date: 26 Jul 2024\n\n${system?.content ?? ""}<|eot_id|>` +
        builtin("llama3.1", messages.filter(without("system"))),
      `llama3.1 ${name}`,
    );
    // Mistral's v3 template puts the system message before the last user message.
    const rest = messages.filter(without("system"));
    const lastUser = rest.findLastIndex((m) => m.role === "user");
    const mistral = system ? [...rest.slice(0, lastUser), system, ...rest.slice(lastUser)] : rest;
    assertEquals(render("mistral-v0.3"), builtin("mistral-v0.3", mistral), `mistral ${name}`);
  }
});

Deno.test("tools appear as each template documents them", () => {
  const rendered = (family: Family, name: string): string => {
    const out = ours(template(family, true), name);
    assert(out.ok, `${family} ${name}`);
    return out.text;
  };
  const tool = (i: number) => ({
    type: "function",
    function: {
      name: TOOLS[i].function.name,
      description: TOOLS[i].function.description ?? "",
      parameters: TOOLS[i].function.parameters,
    },
  });
  const llama = rendered("llama3.1", "tools");
  assertStringIncludes(
    llama,
    "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n",
  );
  assertStringIncludes(
    llama,
    "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond " +
      "with a JSON for a function call with its proper arguments that best answers the given " +
      'prompt.\n\nRespond in the format {"name": function name, "parameters": dictionary of ' +
      "argument name and its value}.Do not use variables.\n\n" +
      `${JSON.stringify(tool(0), null, 4)}\n\n${JSON.stringify(tool(1), null, 4)}\n\n` +
      "Weather in Paris?<|eot_id|>",
  );
  const python = (value: unknown): string =>
    JSON.stringify(value).replaceAll('":', '": ').replaceAll(',"', ', "');
  const mistral = rendered("mistral-v0.3", "tools");
  assertEquals(
    mistral,
    `[AVAILABLE_TOOLS] [${python(tool(0))}, ${python(tool(1))}][/AVAILABLE_TOOLS]` +
      "[INST] Weather in Paris?[/INST]",
  );
  const qwen = rendered("qwen2.5", "tools");
  assertStringIncludes(
    qwen,
    "<tools>\n" + python(tool(0)) + "\n" + python(tool(1)) + "\n</tools>\n\nFor each function " +
      "call, return a json object with function name and arguments within <tool_call></tool_call> " +
      'XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>',
  );
  // Gemma 3's template has no place for tools.
  assertEquals(
    rendered("gemma3", "tools"),
    rendered("gemma3", "plain").replace("Hello", "Weather in Paris?"),
  );
});

Deno.test("a replayed tool call reads back as the same call in the family's syntax", () => {
  const spans: Partial<Record<Family, [string, string]>> = {
    "llama3.1": ["<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"],
    "mistral-v0.3": ["[/INST]", "</s>"],
    "qwen2.5": ["<|im_start|>assistant\n", "<|im_end|>"],
  };
  for (const [family, [open, close]] of Object.entries(spans) as [Family, [string, string]][]) {
    const t = template(family, true);
    const { messages, tools } = conversation("toolResult");
    const text = t.render(messages.slice(0, 2), { tools, now: NOW, addGenerationPrompt: false });
    const from = text.lastIndexOf(open) + open.length;
    const written = text.slice(from, text.indexOf(close, from));
    const parsed = parseOutput(written, {
      reasoning: false,
      toolCalls: true,
      syntax: detectChatFormat(t.source).toolCalls,
      tools,
    });
    assertEquals(parsed.content, "", `${family}: ${written}`);
    assertEquals(parsed.toolCalls.length, 1, `${family}: ${written}`);
    const [call] = parsed.toolCalls;
    assertEquals(call.name, CALL.function.name, family);
    assertEquals(JSON.parse(call.arguments), JSON.parse(CALL.function.arguments), family);
    assertEquals(call.id, family === "mistral-v0.3" ? CALL.id : undefined, family);
  }
});

Deno.test("strftime_now gives what llama.cpp's gives", async () => {
  const format = "%a %A %b %B %C %d %D %e %F %j %m %u %U %w %W %y %Y %%";
  const t = new ChatTemplate(`{{ strftime_now('${format}') }}`);
  const messages = parseMessages([{ role: "user", content: "x" }]);
  const before = t.render(messages);
  const [theirs] = await llamaJinja([{ template: t.source, variables: {} }]);
  const after = t.render(messages);
  assert(theirs.ok);
  // The date may turn between the renders; llama.cpp's must be one of neuron's.
  assert([before, after].includes(theirs.text), `${theirs.text} vs ${before}`);
});

Deno.test("tojson's options give what llama.cpp's give", async () => {
  const value = {
    text: "é \u2028\n\"'<>&",
    list: [1, 2.5, null, true, -0],
    nested: { empty: {}, none: [] },
    big: 12345678901234,
  };
  const templates = [
    "{{ value | tojson }}",
    "{{ value | tojson(indent=2) }}",
    "{{ value | tojson(indent=4) }}",
    "{{ value | tojson(ensure_ascii=True) }}",
    "{{ value | tojson(separators=(',', ':')) }}",
    "{{ value | tojson(indent=2, separators=(',', ': ')) }}",
  ];
  const messages = parseMessages([{ role: "user", content: "x" }]);
  const theirs = await llamaJinja(
    templates.map((template) => ({ template, variables: { value } })),
  );
  templates.forEach((source, i) => {
    const ref = theirs[i];
    assert(ref.ok, `${source}: ${!ref.ok && ref.error}`);
    assertEquals(
      new ChatTemplate(source).render(messages, { kwargs: { value } }),
      ref.text,
      source,
    );
  });
});
