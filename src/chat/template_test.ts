import { assertEquals, assertStringIncludes, assertThrows } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { encodeGguf, Kv, openGguf, parseGgufBytes } from "../gguf/mod.ts";
import { ChatError } from "./errors.ts";
import { parseMessages, parseTools } from "./messages.ts";
import { realTemplateOf } from "../../tests/chat/templates/mod.ts";
import { strftime } from "./strftime.ts";
import { ChatTemplate, chatTemplateFromGguf } from "./template.ts";

const ECHO = "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}" +
  "{% if add_generation_prompt %}<gen>{% endif %}";

function qwen3(): ChatTemplate {
  const file = openGguf(fixture("qwen3-vocab.gguf"));
  try {
    return chatTemplateFromGguf(file);
  } finally {
    file.close();
  }
}

Deno.test("content as text parts is joined with newlines; null content renders empty", () => {
  const t = new ChatTemplate(ECHO);
  const messages = parseMessages([
    { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
    { role: "assistant", content: null },
    { role: "user", content: [{ type: "text", text: "" }, { type: "text", text: "c" }] },
  ]);
  assertEquals(t.render(messages), "[user:a\nb][assistant:][user:c]<gen>");
  assertEquals(
    t.render(messages, { addGenerationPrompt: false }),
    "[user:a\nb][assistant:][user:c]",
  );
});

Deno.test("kwargs are template variables; reserved names are refused", () => {
  const t = new ChatTemplate("{% if enable_thinking is false %}off{% else %}on{% endif %}");
  const messages = parseMessages([{ role: "user", content: "x" }]);
  assertEquals(t.render(messages, { kwargs: { enable_thinking: false } }), "off");
  assertEquals(t.render(messages), "on");
  const err = assertThrows(() => t.render(messages, { kwargs: { messages: [] } }), ChatError);
  assertEquals(err.code, "invalid_request");
});

Deno.test("template failures are ChatErrors with code template_render_failed", () => {
  const parseErr = assertThrows(() => new ChatTemplate("{% for %}"), ChatError);
  assertEquals(parseErr.code, "template_render_failed");
  const raising = new ChatTemplate("{{ raise_exception('roles must alternate') }}");
  const err = assertThrows(
    () => raising.render(parseMessages([{ role: "user", content: "x" }])),
    ChatError,
  );
  assertEquals(err.code, "template_render_failed");
  assertStringIncludes(err.message, "roles must alternate");
});

Deno.test("tool-call arguments given as objects render as a JSON string, as llama-server's", () => {
  const messages = parseMessages([
    { role: "user", content: "Weather?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        type: "function",
        function: { name: "get_weather", arguments: { city: "Paris" } },
      }],
    },
    { role: "tool", content: "sunny" },
  ]);
  const text = qwen3().render(messages);
  assertStringIncludes(
    text,
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call><|im_end|>\n',
  );
  assertStringIncludes(
    text,
    "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n",
  );
});

Deno.test("templates that only take object arguments get string arguments parsed", () => {
  // Llama 3.1 style: `arguments | tojson` would escape a JSON string a second time.
  const t = new ChatTemplate(
    "{% for m in messages %}{% for tc in m.tool_calls or [] %}" +
      "{{ tc.function.name }}{{ tc.function.arguments | tojson }}{% endfor %}{% endfor %}",
  );
  const messages = parseMessages([
    { role: "user", content: "x" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{
        type: "function",
        function: { name: "f", arguments: '{"a": 1, "b": "two"}' },
      }],
    },
  ]);
  assertEquals(t.render(messages), 'f{"a": 1, "b": "two"}');
});

Deno.test("reasoning_content of the turn after the last user message is rendered in <think>", () => {
  const messages = parseMessages([
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: "",
      reasoning_content: "Need the tool.",
      tool_calls: [{ type: "function", function: { name: "w", arguments: "{}" } }],
    },
    { role: "tool", content: "18C" },
  ]);
  assertEquals(
    qwen3().render(messages),
    "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
      "<|im_start|>assistant\n<think>\nNeed the tool.\n</think>\n\n<tool_call>\n" +
      '{"name": "w", "arguments": {}}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\n",
  );
});

Deno.test("tools are reduced to type, name, description and parameters", () => {
  const t = new ChatTemplate("{% for tool in tools %}{{ tool | tojson }}{% endfor %}");
  const tools = parseTools([
    { type: "function", function: { name: "f", strict: true, parameters: { type: "object" } } },
  ]);
  assertEquals(
    t.render(parseMessages([{ role: "user", content: "x" }]), { tools }),
    '{"type": "function", "function": {"name": "f", "description": "", "parameters": {"type": "object"}}}',
  );
});

Deno.test("messages and tools in the wrong shape are refused, naming the field", () => {
  const bad = (value: unknown): string =>
    assertThrows(() => parseMessages(value), ChatError).message;
  assertStringIncludes(bad([{ role: "user", content: 5 }]), "messages[0].content");
  assertStringIncludes(
    bad([{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }]),
    "messages[0].content",
  );
  assertStringIncludes(bad([]), "messages");
  assertStringIncludes(
    assertThrows(() => parseTools([{ type: "function", function: {} }]), ChatError).message,
    "tools[0].function.name",
  );
});

Deno.test("a model without a chat template is a template_missing error", () => {
  const file = parseGgufBytes(encodeGguf({
    kv: [["general.architecture", Kv.string("qwen3")]],
    tensors: [],
  }));
  assertEquals(assertThrows(() => chatTemplateFromGguf(file), ChatError).code, "template_missing");
});

Deno.test("a conversation ending in assistant text continues it instead of opening a turn", () => {
  const qwen = chatTemplateFromGguf(openGguf(fixture("qwen3-tiny-q8_0.gguf")));
  const asked = { role: "user" as const, content: "What is 2+2?" };
  assertEquals(
    qwen.render([asked, { role: "assistant", content: "The answer is" }]),
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n" +
      "<think>\n\n</think>\n\nThe answer is",
  );
  // Asked not to, or with nothing to continue, a new turn opens as before.
  const closed = qwen.render([asked, { role: "assistant", content: "4" }], {
    continueFinal: false,
  });
  assertStringIncludes(closed, "4<|im_end|>\n<|im_start|>assistant\n");
  const empty = qwen.render([asked, { role: "assistant", content: "" }]);
  assertEquals(empty.endsWith("<|im_start|>assistant\n"), true);
  // A template that does not show the text as given cannot continue it.
  const upper = new ChatTemplate("{% for m in messages %}{{ m.content | upper }}{% endfor %}");
  const err = assertThrows(
    () => upper.render([{ role: "assistant", content: "abc" }]),
    ChatError,
  );
  assertEquals(err.code, "invalid_request");
});

Deno.test("a BOS the tokenizer adds itself is not rendered twice; llama.cpp drops the template's", () => {
  const source = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ eos_token }}";
  const messages = parseMessages([{ role: "user", content: "hi" }]);
  const special = { bosToken: "<s>", eosToken: "</s>" };
  assertEquals(new ChatTemplate(source, special).render(messages), "<s>hi</s>");
  assertEquals(new ChatTemplate(source, { ...special, addBos: true }).render(messages), "hi</s>");
  assertEquals(
    new ChatTemplate(source, { ...special, addBos: true, addEos: true }).render(messages),
    "hi",
  );
});

Deno.test("a template's raise_exception is a template_render_failed naming its reason", () => {
  const gemmaLike = new ChatTemplate(
    "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}" +
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}" +
      "{% endif %}{% endfor %}",
  );
  const err = assertThrows(
    () =>
      gemmaLike.render(
        parseMessages([{ role: "user", content: "a" }, { role: "user", content: "b" }]),
      ),
    ChatError,
  );
  assertEquals(err.code, "template_render_failed");
  assertEquals(
    err.message,
    "the model's chat template refused these messages: " +
      "Conversation roles must alternate user/assistant/user/assistant/...",
  );
});

Deno.test("templates see today's date_string and a C-locale strftime_now, as llama.cpp's", () => {
  const t = new ChatTemplate("{{ date_string }}|{{ strftime_now('%A %d %B %Y') }}");
  const messages = parseMessages([{ role: "user", content: "x" }]);
  const [date, long] = t.render(messages).split("|");
  assertEquals(date, strftime(new Date(), "%d %b %Y"));
  assertEquals(long, strftime(new Date(), "%A %d %B %Y"));
  assertEquals(
    t.render(messages, { kwargs: { date_string: "26 Jul 2024" } }).split("|")[0],
    "26 Jul 2024",
  );
  const then = t.render(messages, { now: new Date(2024, 6, 26) });
  assertEquals(then.split("|")[0], "26 Jul 2024");
  for (const name of ["raise_exception", "strftime_now", "range", "none"]) {
    const err = assertThrows(() => t.render(messages, { kwargs: { [name]: 1 } }), ChatError);
    assertEquals(err.code, "invalid_request", name);
  }
});

Deno.test("Mistral's template gets tool-call arguments as objects, as llama.cpp gives them", () => {
  const { source, bosToken, eosToken, addBos } = realTemplateOf("mistral-v0.3");
  const t = new ChatTemplate(source, { bosToken, eosToken, addBos });
  const text = t.render(parseMessages([
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "abcDEF123",
        type: "function",
        function: { name: "get_weather", arguments: '{"city": "Paris"}' },
      }],
    },
    { role: "tool", tool_call_id: "abcDEF123", content: "18C" },
  ]));
  assertEquals(
    text,
    '[INST] Weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": ' +
      '{"city": "Paris"}, "id": "abcDEF123"}]</s>[TOOL_RESULTS] {"content": 18C, ' +
      '"call_id": "abcDEF123"}[/TOOL_RESULTS]',
  );
});
