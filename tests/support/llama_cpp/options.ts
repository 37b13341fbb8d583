/** How the reference opens a model and makes its contexts. */

import type { KvCacheType } from "./context.ts";

/**
 * One thread unless asked: the suite runs two test files at once on two cores, and
 * llama.cpp's threads wait for each other at every op, so with a core taken by the other
 * file two threads ran slower than one (a fixture check: 10 s against 5 s beside one busy
 * core; 90 s in the full suite, which took 13 min 18 s with two threads and 7 min 44 s
 * with one). Benchmarks, and the goldens' reproduction, ask for two.
 */
export const DEFAULT_THREADS = 1;

export interface LlamaOpenOptions {
  /** KV cache size in tokens: a prompt plus what is generated must fit. Default 2048. */
  contextLength?: number;
  /** Threads of every context (default 1). */
  threads?: number;
  /** Only the vocabulary and metadata (tokenize, detokenize, chatTemplate, meta). */
  vocabOnly?: boolean;
  /** Layers offloaded to a GPU (a CUDA build: NEURON_LLAMA_CUDA_DIR); default 0. */
  gpuLayers?: number;
  /**
   * Keep llama.cpp's own threadpool, whose threads spin between calls (benchmarks, where
   * that is its speed). Default: threads that sleep, so that tests running beside it keep
   * their cores.
   */
  spin?: boolean;
  /** KV cache type (llama.cpp's -ctk and -ctv together; quantized ones with flash attention,
   * which llama.cpp needs for a quantized V). Default f16. */
  kvType?: KvCacheType;
  /** The V cache's type when it differs from K's. */
  vType?: KvCacheType;
  /**
   * llama.cpp rotates a quantized cache's heads by a Walsh-Hadamard matrix where head_dim is a
   * multiple of 64 (attn_rot_k/v), as neuron does (kvRotation); false turns it off
   * (LLAMA_ATTN_ROT_DISABLE), to show what the rotation changes. Default true.
   */
  rotateQuantizedKv?: boolean;
}
