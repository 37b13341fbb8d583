/**
 * From an OpenAI request to what the engine runs and how the answer is written: parsing
 * and validation (all 4xx happen here, before admission), sampling defaults from the
 * model, and the renderer for the route and `stream` flag. Text routes go to text models,
 * `/v1/embeddings` to embedding models and `/v1/rerank` to rerankers; any other pairing is
 * refused saying what the model serves.
 */

import type { GenerateRequest, PoolInput, PoolResult } from "../../frontend/mod.ts";
import type { ModelKind } from "../../models/pooling.ts";
import type { ModelDescription } from "./describe.ts";
import {
  chatCompletion,
  completion,
  embeddingsResponse,
  type Generation,
  OpenAiError,
  parseChatRequest,
  parseCompletionRequest,
  parseEmbeddingsRequest,
  parseRerankRequest,
  parseResponsesRequest,
  rerankResponse,
  resolveSampling,
  response,
  streamChatCompletion,
  streamCompletion,
  streamResponse,
  type StructuredOutput,
} from "../../openai/mod.ts";
import type { InferenceCall, InferenceRoute } from "../harness.ts";

/** A request that generates: what the engine runs, and how its events are answered. */
export interface GeneratePlan {
  kind: "generate";
  request: Omit<GenerateRequest, "id">;
  render(gen: Generation): Promise<Response>;
}

/** A request that pools (embeddings, rerank): its inputs, and how the result is answered. */
export interface PoolPlan {
  kind: "pool";
  inputs: PoolInput[];
  render(result: PoolResult): Response;
}

export type Plan = GeneratePlan | PoolPlan;

const json = (body: unknown): Response =>
  new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

/** The kind of model each route is for. */
const ROUTE_KIND: Record<InferenceRoute, ModelKind> = {
  "chat/completions": "text",
  "completions": "text",
  "responses": "text",
  "embeddings": "embeddings",
  "rerank": "rerank",
};

/** Where a model of each kind is asked. */
const KIND_ROUTE: Record<ModelKind, string> = {
  text: "/v1/chat/completions, /v1/completions and /v1/responses",
  embeddings: "/v1/embeddings",
  rerank: "/v1/rerank",
};

const KIND_NAME: Record<ModelKind, string> = {
  text: "a text generation model",
  embeddings: "an embedding model",
  rerank: "a reranker",
};

export function planCall(call: InferenceCall, model: ModelDescription): Plan {
  if (ROUTE_KIND[call.route] !== model.kind) {
    throw new OpenAiError(
      "invalid_request",
      `the model '${call.model}' is ${KIND_NAME[model.kind]}: it serves ` +
        `${KIND_ROUTE[model.kind]}, not /v1/${call.route}`,
      "model",
    );
  }
  const { route } = call;
  if (route === "embeddings") return planEmbeddings(call, model);
  if (route === "rerank") return planRerank(call);
  const plan = planFor({ ...call, route }, model);
  checkLogitBias(plan.request.sampling.logitBias, model.vocabSize);
  return plan;
}

function planEmbeddings(call: InferenceCall, model: ModelDescription): PoolPlan {
  const r = parseEmbeddingsRequest(call.json);
  if (r.dimensions !== undefined && r.dimensions > model.embeddingLength) {
    throw new OpenAiError(
      "invalid_request_body",
      `dimensions: this model's embeddings have ${model.embeddingLength} dimensions, ` +
        `${r.dimensions} were asked for`,
      "dimensions",
    );
  }
  const opts = { model: call.model, encoding: r.encoding, dimensions: r.dimensions };
  return {
    kind: "pool",
    inputs: r.inputs,
    render: (result) => json(embeddingsResponse(result.vectors, result.promptTokens, opts)),
  };
}

function planRerank(call: InferenceCall): PoolPlan {
  const r = parseRerankRequest(call.json);
  const opts = {
    model: call.model,
    documents: r.documents,
    topN: r.topN,
    returnDocuments: r.returnDocuments,
  };
  return {
    kind: "pool",
    inputs: r.inputs,
    render: (result) => json(rerankResponse(result.scores, result.promptTokens, opts)),
  };
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

function planFor(
  call: InferenceCall & { route: "chat/completions" | "completions" | "responses" },
  model: ModelDescription,
): GeneratePlan {
  const defaults = model.samplingDefaults;
  const name = call.model;
  switch (call.route) {
    case "chat/completions": {
      const r = parseChatRequest(call.json, call.headers);
      const opts = { model: name, logprobs: r.logprobs, tokensAsIds: r.tokensAsIds, n: r.n };
      return {
        kind: "generate",
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
          n: r.n,
          ...(r.speculative ? { speculative: r.speculative } : {}),
        },
        render: async (gen) =>
          r.stream ? streamChatCompletion(gen, opts) : json(await chatCompletion(gen, opts)),
      };
    }
    case "completions": {
      const r = parseCompletionRequest(call.json);
      const opts = { model: name, logprobs: r.logprobs, tokensAsIds: r.tokensAsIds, n: r.n };
      return {
        kind: "generate",
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
          n: r.n,
          echo: r.echo,
          ...(r.echo && r.logprobs !== null ? { promptLogprobs: r.logprobs } : {}),
          ...(r.speculative ? { speculative: r.speculative } : {}),
        },
        render: async (gen) =>
          r.stream ? streamCompletion(gen, opts) : json(await completion(gen, opts)),
      };
    }
    case "responses": {
      const r = parseResponsesRequest(call.json, call.headers);
      const opts = { model: name, echo: r.echo };
      return {
        kind: "generate",
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
