/**
 * `/v1/embeddings` answers: per input, in order, its embedding L2-normalised (after
 * truncation to `dimensions`), as floats or as the base64 of little-endian float32s, with
 * the tokens of every input in `usage`.
 */

import type { EmbeddingEncoding } from "./embeddings_request.ts";

export interface EmbeddingsRenderOptions {
  model: string;
  encoding: EmbeddingEncoding;
  dimensions?: number;
}

/** `v` cut to its first `dimensions` features and scaled to unit length (zero stays zero). */
export function normalizedEmbedding(v: Float32Array, dimensions?: number): Float32Array {
  const out = v.slice(0, dimensions ?? v.length);
  let sum = 0;
  for (const x of out) sum += x * x;
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0;
  for (let i = 0; i < out.length; i++) out[i] *= scale;
  return out;
}

export function embeddingsResponse(
  vectors: readonly Float32Array[],
  promptTokens: number,
  opts: EmbeddingsRenderOptions,
): Record<string, unknown> {
  return {
    object: "list",
    model: opts.model,
    data: vectors.map((v, index) => {
      const e = normalizedEmbedding(v, opts.dimensions);
      return {
        object: "embedding",
        index,
        embedding: opts.encoding === "base64" ? base64(littleEndian(e)) : Array.from(e),
      };
    }),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/** The bytes of `v` as little-endian float32s, whatever this machine's order. */
function littleEndian(v: Float32Array): Uint8Array {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  v.forEach((x, i) => view.setFloat32(i * 4, x, true));
  return bytes;
}

function base64(bytes: Uint8Array): string {
  let binary = "";
  // In slices: a spread of a whole long vector would overflow the call's arguments.
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
