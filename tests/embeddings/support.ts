/**
 * What the embedding and rerank suites share: a model session in this thread (front end,
 * engine, runner, as a model's Worker runs them) driven step by step, texts of varied
 * length to embed, and cosine similarity.
 */

import type { DeviceChoice } from "../../src/backend/mod.ts";
import type { PoolInput, PoolResult } from "../../src/frontend/mod.ts";
import { type ModelLoadOptions, ModelSession } from "../../src/harness/native/model_session.ts";

export interface SessionOptions {
  device?: DeviceChoice;
  /** Tokens per step at most (prompts longer than this are pooled over several steps). */
  maxBatchTokens?: number;
  maxSequences?: number;
  cuda?: ModelLoadOptions["cuda"];
}

/** A session on `path`; close it when done. */
export function openSession(path: string, opts: SessionOptions = {}): ModelSession {
  return ModelSession.open({
    modelPath: path,
    device: opts.device ?? "cpu",
    threads: 2,
    contextLength: 2048,
    maxSequences: opts.maxSequences ?? 64,
    maxBatchTokens: opts.maxBatchTokens ?? 512,
    kvDtype: "f16",
    cuda: opts.cuda,
  });
}

/** Pools `inputs` through the session (one request: batched by its scheduler). */
export async function pool(session: ModelSession, inputs: PoolInput[]): Promise<PoolResult> {
  const { result } = await session.pool({ id: crypto.randomUUID(), inputs });
  while (session.hasWork) session.step();
  return await result;
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
}

/** Texts of 1 to ~60 tokens: words, code, numbers, other scripts, a control token. */
export const TEXTS = [
  "hello",
  "The quick brown fox jumps over the lazy dog.",
  "What is the capital of France?",
  "Instruct: Given a web search query, retrieve relevant passages\nQuery: how do plants eat",
  "def add(a, b):\n    return a + b\n",
  "3.14159 2.71828 1.41421 1.73205",
  "Photosynthesis converts light energy into chemical energy stored in glucose molecules, " +
  "which plants use to grow; oxygen is released as a by-product of splitting water.",
  "東京は日本の首都です。",
  "Привет, как дела?",
  "<|im_start|>user\nhi<|im_end|>",
  "a",
  "Embeddings map texts to vectors so that similar meanings land close together, and " +
  "retrieval pipelines compare those vectors by cosine similarity to find passages.",
];
