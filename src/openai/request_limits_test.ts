import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { parseChatRequest } from "./chat_request.ts";
import { parseCompletionRequest } from "./completion_request.ts";
import { OpenAiError } from "./errors.ts";
import { parseResponsesRequest } from "./responses_request.ts";

/**
 * Every limit a request can exceed is refused with a message that says the limit, so a
 * client can fix the request without reading our source.
 */

const none = new Headers();
const chat = (extra: Record<string, unknown>) => () =>
  parseChatRequest({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra }, none);
const completion = (extra: Record<string, unknown>) => () =>
  parseCompletionRequest({ model: "m", prompt: "a", ...extra });
const responses = (extra: Record<string, unknown>) => () =>
  parseResponsesRequest({ model: "m", input: "hi", ...extra }, none);

const CASES: [string, () => unknown, string, string][] = [
  ["temperature", chat({ temperature: 2.5 }), "temperature", "between 0 and 2"],
  ["top_p 0", chat({ top_p: 0 }), "top_p", "greater than 0 and at most 1"],
  ["top_k", chat({ top_k: -2 }), "top_k", "at least -1"],
  ["min_p", chat({ min_p: 1.5 }), "min_p", "between 0 and 1"],
  ["presence_penalty", chat({ presence_penalty: 3 }), "presence_penalty", "between -2 and 2"],
  ["frequency_penalty", chat({ frequency_penalty: -3 }), "frequency_penalty", "between -2 and 2"],
  [
    "repetition_penalty",
    chat({ repetition_penalty: 11 }),
    "repetition_penalty",
    "greater than 0 and at most 10",
  ],
  ["logit_bias", chat({ logit_bias: { "5": 101 } }), "logit_bias.5", "between -100 and 100"],
  [
    "stop",
    chat({ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }),
    "stop",
    "at most 16 stop sequences",
  ],
  ["n", chat({ n: 0 }), "n", "between 1 and 128"],
  ["n above 128", chat({ n: 129 }), "n", "between 1 and 128"],
  ["max_tokens", chat({ max_tokens: 0 }), "max_tokens", "at least 1"],
  [
    "max_completion_tokens",
    chat({ max_completion_tokens: 0 }),
    "max_completion_tokens",
    "at least 1",
  ],
  ["top_logprobs", chat({ logprobs: true, top_logprobs: 21 }), "top_logprobs", "between 0 and 20"],
  ["messages", chat({ messages: [] }), "messages", "at least one message"],
  [
    "tool name",
    chat({ tools: [{ type: "function", function: { name: "" } }] }),
    "tools[0].function.name",
    "must not be empty",
  ],
  ["model", chat({ model: "" }), "model", "must not be empty"],
  ["completion logprobs", completion({ logprobs: 21 }), "logprobs", "between 0 and 20"],
  ["best_of", completion({ best_of: 0 }), "best_of", "at least 1"],
  ["completion max_tokens", completion({ max_tokens: -1 }), "max_tokens", "at least 0"],
  ["empty prompt list", completion({ prompt: [] }), "prompt", "at least one"],
  ["negative token id", completion({ prompt: [5, -1] }), "prompt[1]", "at least 0"],
  ["max_output_tokens", responses({ max_output_tokens: 0 }), "max_output_tokens", "at least 1"],
  ["responses temperature", responses({ temperature: -1 }), "temperature", "between 0 and 2"],
  ["empty input", responses({ input: [] }), "input", "at least one item"],
];

Deno.test("request limits: each refusal names the field and says the limit", () => {
  for (const [what, parse, param, limit] of CASES) {
    const err = assertThrows(parse, OpenAiError);
    assertEquals([err.code, err.param], ["invalid_request_body", param], `${what}: ${err.message}`);
    assert(err.message.includes(limit), `${what}: "${err.message}" does not say "${limit}"`);
  }
});
