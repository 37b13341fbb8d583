import { assertEquals } from "../../tests/support/assert.ts";
import { withStreamUsage } from "./stream_usage.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function rewrite(text: string): string {
  const body = enc.encode(text);
  const out = withStreamUsage(body, JSON.parse(text));
  return out === body ? "(unchanged)" : dec.decode(out);
}

Deno.test("withStreamUsage: asks a stream for usage, changing nothing else", () => {
  const cases: [string, string][] = [
    [`{"stream":true}`, `{"stream":true,"stream_options":{"include_usage":true}}`],
    [
      `{ "stream" : true , "n": 12345678901234567890 }`,
      `{ "stream" : true , "n": 12345678901234567890 ,"stream_options":{"include_usage":true}}`,
    ],
    [
      `{"stream":true,"stream_options":null,"x":"\\"}"}`,
      `{"stream":true,"stream_options":{"include_usage":true},"x":"\\"}"}`,
    ],
    [
      `{"stream_options":{"include_usage":false,"a":[1,{"b":"}"}]},"stream":true}`,
      `{"stream_options":{"include_usage":true,"a":[1,{"b":"}"}]},"stream":true}`,
    ],
    // A key that only looks like it, inside a message, is left alone.
    [
      `{"messages":[{"content":"\\"stream_options\\": 1"}],"stream":true}`,
      `{"messages":[{"content":"\\"stream_options\\": 1"}],"stream":true,"stream_options":{"include_usage":true}}`,
    ],
    // JSON.parse keeps the last of duplicate keys, and so does the rewrite.
    [
      `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`,
      `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`,
    ],
    [`{"stream":true,"stream_options":{"include_usage":true}}`, "(unchanged)"],
    [`{"stream":false}`, "(unchanged)"],
    [`{"model":"m"}`, "(unchanged)"],
  ];
  for (const [input, expected] of cases) {
    const out = rewrite(input);
    assertEquals(out, expected, input);
    if (expected !== "(unchanged)") {
      assertEquals(JSON.parse(out).stream_options.include_usage, true);
    }
  }
});
