/**
 * From an OpenAI request to what the engine runs and how the answer is written: parsing
 * and validation (all 4xx happen here, before admission), sampling defaults from the
 * model, and the renderer for the route and `stream` flag.
 */

import type { GenerateRequest } from "../../frontend/mod.ts";
import type { ModelDescription } from "./describe.ts";
import {
  chatCompletion,
  completion,
  type Generation,
  OpenAiError,
  parseChatRequest,
  parseCompletionRequest,
  parseResponsesRequest,
  resolveSampling,
  response,
  streamChatCompletion,
  streamCompletion,
  streamResponse,
  type StructuredOutput,
} from "../../openai/mod.ts";
import type { InferenceCall } from "../harness.ts";

export interface Plan {
  request: Omit<GenerateRequest, "id">;
  render(gen: Generation): Promise<Response>;
}

const json = (body: unknown): Response =>
  new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

export function planCall(call: InferenceCall, model: ModelDescription): Plan {
  const plan = planFor(call, model);
  checkLogitBias(plan.request.sampling.logitBias, model.vocabSize);
  return plan;
}

/** A bias on a token the model does not have would be silently ignored: refuse it. */
function checkLogitBias(bias: ReadonlyMap<number, number> | undefined, vocabSize: number): void {
  for (const id of bias?.keys() ?? []) {
    if (!(Number.isInteger(id) && id >= 0 && id < vocabSize)) {
      throw new OpenAiError(
        "invalid_request_body",
        `logit_bias: token ${id} is outside this model's vocabulary (0..${vocabSize - 1})`,
        `logit_bias.${id}`,
      );
    }
  }
}

/** The output constraint a request carries, in the front end's terms. */
function structured(r: StructuredOutput): Pick<GenerateRequest, "constraint" | "maxToolCalls"> {
  return {
    ...(r.constraint ? { constraint: r.constraint } : {}),
    ...(r.maxToolCalls !== undefined ? { maxToolCalls: r.maxToolCalls } : {}),
  };
}

function planFor(call: InferenceCall, model: ModelDescription): Plan {
  const defaults = model.samplingDefaults;
  const name = call.model;
  switch (call.route) {
    case "chat/completions": {
      const r = parseChatRequest(call.json, call.headers);
      const opts = { model: name, logprobs: r.logprobs, tokensAsIds: r.tokensAsIds };
      return {
        request: {
          prompt: {
            kind: "messages",
            messages: r.messages,
            ...(r.tools.length ? { tools: r.tools } : {}),
            templateKwargs: r.templateKwargs,
          },
          maxTokens: r.maxTokens,
          sampling: resolveSampling(r.sampling, defaults, {
            logprobs: r.logprobs,
            topLogprobs: r.topLogprobs,
          }),
          stop: r.stop,
          parseOutput: true,
          ...structured(r),
        },
        render: async (gen) =>
          r.stream ? streamChatCompletion(gen, opts) : json(await chatCompletion(gen, opts)),
      };
    }
    case "completions": {
      const r = parseCompletionRequest(call.json);
      const opts = { model: name, logprobs: r.logprobs, tokensAsIds: r.tokensAsIds };
      return {
        request: {
          prompt: r.prompt,
          maxTokens: r.maxTokens,
          sampling: resolveSampling(r.sampling, defaults, {
            logprobs: r.logprobs !== null,
            topLogprobs: r.logprobs ?? 0,
          }),
          stop: r.stop,
          parseOutput: false,
          ...structured(r),
        },
        render: async (gen) =>
          r.stream ? streamCompletion(gen, opts) : json(await completion(gen, opts)),
      };
    }
    case "responses": {
      const r = parseResponsesRequest(call.json, call.headers);
      const opts = { model: name, echo: r.echo };
      return {
        request: {
          prompt: {
            kind: "messages",
            messages: r.messages,
            ...(r.tools.length ? { tools: r.tools } : {}),
            templateKwargs: r.templateKwargs,
          },
          maxTokens: r.maxTokens,
          sampling: resolveSampling(r.sampling, defaults, { logprobs: false, topLogprobs: 0 }),
          parseOutput: true,
          ...structured(r),
        },
        render: async (gen) =>
          r.stream ? streamResponse(gen, opts) : json(await response(gen, opts)),
      };
    }
  }
}
