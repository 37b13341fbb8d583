/**
 * What a model file is for, beyond generating text, as its GGUF says it the way llama.cpp
 * reads it. `<arch>.pooling_type` (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank)
 * makes an embedding model, whose final hidden states (after the output norm) are pooled
 * by mean, first or last token, or a reranker (rank), whose pooled state goes through a
 * classifier head (`cls.output.weight`); for Qwen3 that head's outputs are softmaxed and
 * the last token pooled, as llama.cpp does for the Qwen3-Reranker conversions.
 *
 * A Qwen3-Reranker GGUF converted as a plain causal LM (no pooling type) is a reranker too:
 * its model card scores the yes/no logits of the last token after its prompt, which is
 * the same head made of the output matrix's "yes" and "no" rows.
 */

import {
  dequantizeRow,
  type GgufFile,
  optionalBool,
  optionalNumber,
  optionalString,
  optionalStringArray,
  rowBytes,
} from "../gguf/mod.ts";
import { ModelError } from "./errors.ts";

/** Which final hidden states make an input's vector. */
export type Pooling = "mean" | "cls" | "last";

/** What a model serves: text generation, embeddings or rerank scores. */
export type ModelKind = "text" | "embeddings" | "rerank";

/** A classifier head over a pooled hidden state: `outputs = softmax?(W · h + b)`. */
export interface RankHead {
  /** One name per output (`<arch>.classifier.output_labels`); the first is the score. */
  readonly labels: readonly string[];
  /** The head's outputs for one pooled hidden state (the model's embedding width). */
  score(hidden: Float32Array): Float32Array;
}

export interface ModelPooling {
  kind: ModelKind;
  /** The rows pooled; null for a text model. */
  pooling: Pooling | null;
  /** The reranker's head; null unless `kind` is rerank. */
  rankHead: RankHead | null;
  /**
   * The prompt a reranker's pair is put in, `{query}` and `{document}` replaced (as
   * llama-server's `tokenizer.chat_template.rerank`); null: `[BOS] query [EOS] [SEP]
   * document [EOS]` with the tokens the vocabulary adds.
   */
  rerankPrompt: string | null;
}

export const TEXT_MODEL: ModelPooling = {
  kind: "text",
  pooling: null,
  rankHead: null,
  rerankPrompt: null,
};

/** llama.cpp's llama_pooling_type values (-1 is "unspecified": the file leaves it). */
const POOLING_TYPES: Readonly<Record<number, Pooling | "none" | "rank">> = {
  [-1]: "none",
  0: "none",
  1: "mean",
  2: "cls",
  3: "last",
  4: "rank",
};

/** Architectures whose rank pooling takes the last token and softmaxes the head (llama.cpp). */
const LAST_TOKEN_RANK: ReadonlySet<string> = new Set(["qwen3", "qwen3vl"]);

/** Qwen3-Reranker's prompt, from its model card (llama.cpp's converter writes the same). */
export const QWEN3_RERANKER_PROMPT = "<|im_start|>system\nJudge whether the Document meets " +
  "the requirements based on the Query and the Instruct provided. Note that the answer can " +
  'only be "yes" or "no".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search ' +
  "query, retrieve relevant " +
  "passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n" +
  "<|im_start|>assistant\n<think>\n\n</think>\n\n";

/** Reads what `file` (of architecture `arch`, hidden states `nEmbd` wide) is for. */
export function readPooling(file: GgufFile, arch: string, nEmbd: number): ModelPooling {
  if (optionalBool(file, `${arch}.attention.causal`) === false) {
    throw new ModelError(
      "unsupported_attention",
      `${arch}.attention.causal is false: non-causal attention is not supported for ${arch}`,
    );
  }
  const key = `${arch}.pooling_type`;
  const value = optionalNumber(file, key) ?? -1;
  const type = POOLING_TYPES[value];
  if (type === undefined) {
    throw new ModelError("unsupported_pooling", `${key} is ${value}, not a pooling type (-1..4)`);
  }
  const rerankPrompt = optionalString(file, "tokenizer.chat_template.rerank") ?? null;
  if (type === "rank") {
    const last = LAST_TOKEN_RANK.has(arch);
    return {
      kind: "rerank",
      pooling: last ? "last" : "cls",
      rankHead: classifierHead(file, arch, nEmbd, last),
      rerankPrompt,
    };
  }
  if (type !== "none") return { kind: "embeddings", pooling: type, rankHead: null, rerankPrompt };
  const yesNo = arch === "qwen3" ? qwen3RerankerTokens(file) : null;
  if (yesNo === null) return TEXT_MODEL;
  return {
    kind: "rerank",
    pooling: "last",
    rankHead: outputRowsHead(file, nEmbd, yesNo),
    rerankPrompt: rerankPrompt ?? QWEN3_RERANKER_PROMPT,
  };
}

/** The head `cls.output.weight` (+ `cls.output.bias`) of a rank-pooling file. */
function classifierHead(file: GgufFile, arch: string, nEmbd: number, softmax: boolean): RankHead {
  if (file.tensor("cls.weight") !== undefined) {
    throw new ModelError(
      "unsupported_pooling",
      "cls.weight (a dense classification layer before cls.output) is not supported",
    );
  }
  if (file.tensor("cls.output.weight") === undefined) {
    throw new ModelError(
      "unsupported_pooling",
      `${arch}.pooling_type is rank but the file has no cls.output.weight`,
    );
  }
  const weight = tensorRows(file, "cls.output.weight", nEmbd);
  const nOut = weight.length;
  const labels = optionalStringArray(file, `${arch}.classifier.output_labels`) ??
    Array.from({ length: nOut }, (_, i) => `LABEL_${i}`);
  if (labels.length !== nOut) {
    throw new ModelError(
      "bad_tensor_shape",
      `${arch}.classifier.output_labels names ${labels.length} outputs, cls.output.weight has ${nOut}`,
    );
  }
  const bias = file.tensor("cls.output.bias") === undefined
    ? null
    : tensorRows(file, "cls.output.bias", nOut)[0];
  return linearHead(labels, weight, bias, softmax);
}

/**
 * The "yes" and "no" ids of a Qwen3 file whose name says it is a reranker (general.name or
 * general.basename, as the Qwen3-Reranker GGUFs are named), else null.
 */
function qwen3RerankerTokens(file: GgufFile): [number, number] | null {
  const name = [optionalString(file, "general.name"), optionalString(file, "general.basename")];
  if (!name.some((n) => n !== undefined && /reranker/i.test(n))) return null;
  const tokens = optionalStringArray(file, "tokenizer.ggml.tokens") ?? [];
  const yes = tokens.indexOf("yes"), no = tokens.indexOf("no");
  return yes >= 0 && no >= 0 ? [yes, no] : null;
}

/** The output matrix's rows of `ids` (the token embedding when the output is tied). */
function outputRowsHead(file: GgufFile, nEmbd: number, ids: [number, number]): RankHead {
  const name = file.tensor("output.weight") === undefined ? "token_embd.weight" : "output.weight";
  const rows = tensorRows(file, name, nEmbd, ids);
  return linearHead(["yes", "no"], rows, null, true);
}

/** Rows of a 1- or 2-dimensional tensor `cols` wide, dequantized (all, or those listed). */
function tensorRows(
  file: GgufFile,
  name: string,
  cols: number,
  only?: readonly number[],
): Float32Array[] {
  const t = file.requireTensor(name);
  const nRows = t.ne[1] ?? 1;
  if (t.ne[0] !== cols || t.ne.slice(2).some((d) => d !== 1) || nRows < 1) {
    throw new ModelError(
      "bad_tensor_shape",
      `tensor '${name}' has shape [${t.ne.join(", ")}], expected [${cols}, n]`,
    );
  }
  const bytes = file.data(t);
  const stride = rowBytes(t.type, cols);
  return (only ?? Array.from({ length: nRows }, (_, i) => i)).map((row) => {
    const out = new Float32Array(cols);
    dequantizeRow(t.type, bytes.subarray(row * stride, (row + 1) * stride), out);
    return out;
  });
}

function linearHead(
  labels: readonly string[],
  weight: Float32Array[],
  bias: Float32Array | null,
  softmax: boolean,
): RankHead {
  return {
    labels,
    score(hidden: Float32Array): Float32Array {
      const out = new Float32Array(weight.length);
      weight.forEach((w, i) => {
        let dot = bias?.[i] ?? 0;
        for (let j = 0; j < w.length; j++) dot += w[j] * hidden[j];
        out[i] = dot;
      });
      if (softmax) softmaxInPlace(out);
      return out;
    },
  };
}

function softmaxInPlace(x: Float32Array): void {
  const max = Math.max(...x);
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i] = Math.exp(x[i] - max);
  for (let i = 0; i < x.length; i++) x[i] /= sum;
}
