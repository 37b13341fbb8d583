import { assertEquals } from "../../tests/support/assert.ts";
import { parseToolCallBody } from "./tool_calls.ts";

Deno.test("Hermes bodies become calls with JSON-string arguments", () => {
  assertEquals(
    parseToolCallBody('\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n'),
    { name: "get_weather", arguments: '{"city":"Paris","days":3}' },
  );
  assertEquals(parseToolCallBody('{"name": "now"}'), { name: "now", arguments: "{}" });
  assertEquals(
    parseToolCallBody('{"name": "f", "arguments": "{\\"a\\": 1}"}'),
    { name: "f", arguments: '{"a": 1}' },
  );
});

Deno.test("bodies that are not a call are refused", () => {
  for (
    const body of [
      '{"name": "f", "arguments": {',
      '{"arguments": {}}',
      '{"name": "", "arguments": {}}',
      '["f"]',
      "call f please",
      "",
    ]
  ) {
    assertEquals(parseToolCallBody(body), null, JSON.stringify(body));
  }
});

Deno.test("Qwen3-Coder XML bodies: JSON values parse, other values stay text", () => {
  const body = "\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n" +
    '<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{"metric": true}\n</parameter>\n' +
    "</function>\n";
  assertEquals(parseToolCallBody(body), {
    name: "get_weather",
    arguments: '{"city":"New York","days":3,"opts":{"metric":true}}',
  });
  assertEquals(parseToolCallBody("<function=ping>\n</function>"), {
    name: "ping",
    arguments: "{}",
  });
  // Multi-line values keep their inner newlines.
  assertEquals(
    parseToolCallBody("<function=write>\n<parameter=text>\na\n\nb\n</parameter>\n</function>"),
    { name: "write", arguments: '{"text":"a\\n\\nb"}' },
  );
});

Deno.test("an XML parameter declared as a string stays a string", () => {
  const tools = [{
    type: "function" as const,
    function: {
      name: "lookup",
      parameters: {
        type: "object",
        properties: { zip: { type: "string" }, n: { type: "integer" } },
      },
    },
  }];
  assertEquals(
    parseToolCallBody(
      "<function=lookup>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n2\n</parameter>\n</function>",
      tools,
    ),
    { name: "lookup", arguments: '{"zip":"01234","n":2}' },
  );
});

Deno.test("malformed XML bodies are refused", () => {
  for (
    const body of [
      "<function=f>\n<parameter=a>\n1\n</function>",
      "<function=f>\nstray text\n<parameter=a>1</parameter>\n</function>",
      "<function=>\n</function>",
      "<function=f>",
    ]
  ) {
    assertEquals(parseToolCallBody(body), null, JSON.stringify(body));
  }
});
