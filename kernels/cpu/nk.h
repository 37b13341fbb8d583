/*
 * neuron CPU kernels: the public C interface loaded by src/backend/cpu/library.ts.
 *
 * Conventions: every op takes the pool first; sizes are int64; activations are f32
 * row-major; weights are ggml tensors read in place (a row of `cols` values is
 * cols / block_size * type_size bytes, rows contiguous). Functions that can reject their
 * input return 0 on success or a negative NK_E* code and then have written nothing.
 * A pool is driven by one calling thread at a time.
 */
#ifndef NK_H
#define NK_H

#include <stddef.h>
#include <stdint.h>

#define NK_API __attribute__((visibility("default")))

/* ggml type ids (ggml.h). */
enum {
  NK_F32 = 0,
  NK_F16 = 1,
  NK_Q4_0 = 2,
  NK_Q4_1 = 3,
  NK_Q5_0 = 6,
  NK_Q5_1 = 7,
  NK_Q8_0 = 8,
  NK_Q2_K = 10,
  NK_Q3_K = 11,
  NK_Q4_K = 12,
  NK_Q5_K = 13,
  NK_Q6_K = 14,
  NK_BF16 = 30,
  /* Repacked for few-row products (nk_repack; not ggml types). */
  NK_Q8_0_R16 = 0x108,
  NK_Q4_K_R16 = 0x10C,
  NK_Q6_K_R16 = 0x10E,
};

enum { NK_OK = 0, NK_EINVAL = -1, NK_ENOMEM = -2, NK_EUNSUPPORTED = -3, NK_EINTERRUPTED = -4 };

/* Dispatch levels, best last. */
enum { NK_ISA_SCALAR = 0, NK_ISA_AVX2 = 1, NK_ISA_AVX512 = 2, NK_ISA_AVX512VBMI = 3 };

/* nk_cpu_features() bits. */
enum {
  NK_CPU_AVX2 = 1 << 0,
  NK_CPU_FMA = 1 << 1,
  NK_CPU_F16C = 1 << 2,
  NK_CPU_AVX512F = 1 << 3,
  NK_CPU_AVX512BW = 1 << 4,
  NK_CPU_AVX512VL = 1 << 5,
  NK_CPU_AVX512DQ = 1 << 6,
  NK_CPU_AVX512VNNI = 1 << 7,
  NK_CPU_AVX512BF16 = 1 << 8,
  NK_CPU_AVXVNNI = 1 << 9,
  NK_CPU_AMX_INT8 = 1 << 10,
  NK_CPU_AMX_BF16 = 1 << 11,
  NK_CPU_AVX512VBMI = 1 << 12,
};

typedef struct nk_pool nk_pool;

NK_API uint32_t nk_cpu_features(void);
/* The best level this CPU runs. */
NK_API int32_t nk_best_isa(void);

/* n_threads <= 0 means one per online CPU. The calling thread is thread 0. */
NK_API nk_pool *nk_pool_create(int32_t n_threads);
NK_API void nk_pool_destroy(nk_pool *pool);
NK_API int32_t nk_pool_threads(const nk_pool *pool);
/* Forces the dispatch level of this pool's ops (tests check every level); fails when the
 * CPU lacks it. */
NK_API int32_t nk_pool_set_isa(nk_pool *pool, int32_t level);
NK_API int32_t nk_pool_isa(const nk_pool *pool);
/* On when the weights this pool's matmuls read sit on small pages (read in place from a
 * file mapping): the kernels then prefetch further ahead, whole pages included. Off by
 * default, for weights on huge pages, where that costs more than it saves. */
NK_API void nk_pool_set_page_prefetch(nk_pool *pool, int32_t on);

/* 64-byte aligned, zeroed. */
NK_API void *nk_alloc(uint64_t bytes);
/* The same on transparent huge pages where the system allows them, for weights streamed
 * once per token: 2 MiB pages spare the page walks (costly under virtualization) that
 * 4 KiB pages take every 4 KiB, which measurably slows a streaming core. nk_free frees it. */
NK_API void *nk_alloc_huge(uint64_t bytes);
NK_API void nk_free(void *ptr);
/* Backs every page of p[0, bytes) (an nk_alloc_huge buffer) with memory now, the pool's
 * threads each taking a share: NK_ENOMEM when the system cannot. */
NK_API int32_t nk_prefault(nk_pool *pool, void *p, uint64_t bytes);

/* Bytes of one row of `cols` values of `type`; negative when the type is unknown or cols
 * is not a whole number of blocks. */
NK_API int64_t nk_row_bytes(int32_t type, int64_t cols);

/* The repacked type (NK_*_R16) `type` is worth repacking into on this CPU for products of
 * a few rows, or 0 when none is. */
NK_API int32_t nk_r16_type(int32_t type);
/* Writes the rows x cols matrix src of `type` repacked (repack.c says how) to dst, which
 * holds nk_row_bytes(nk_r16_type(type), cols) * rows bytes on huge pages (nk_alloc_huge:
 * the kernels prefetch for those); rows % 16 == 0. A repacked
 * matrix goes to nk_matmul, nk_matmul_many, nk_matmul_ref and nk_get_rows under its
 * NK_*_R16 type. */
NK_API int32_t nk_repack(nk_pool *pool, int32_t type, const void *src, int64_t rows, int64_t cols,
                         void *dst);

/* y[t*rows + r] = sum_c W[r][c] * x[t*cols + c]. */
NK_API int32_t nk_matmul(nk_pool *pool, int32_t type, const void *w, int64_t rows, int64_t cols,
                         const float *x, int64_t n_tokens, float *y);
/* y_m = W_m x for n (at most 8) matrices of one width that share x: the activations are
 * quantized once and the rows of all of them split over the pool in one pass, so the
 * threads synchronize once. */
NK_API int32_t nk_matmul_many(nk_pool *pool, int32_t n, const int32_t *types,
                              const void *const *ws, const int64_t *rows, int64_t cols,
                              const float *x, int64_t n_tokens, float *const *ys);
/* Same contract, plain C: each weight row dequantized to f32 and dotted in double. */
NK_API int32_t nk_matmul_ref(nk_pool *pool, int32_t type, const void *w, int64_t rows, int64_t cols,
                             const float *x, int64_t n_tokens, float *y);

NK_API int32_t nk_dequantize_rows(int32_t type, const void *src, int64_t n_rows, int64_t cols,
                                  float *dst);
/* out[i] = row ids[i] of table, dequantized; ids outside [0, n_rows) are rejected. */
NK_API int32_t nk_get_rows(nk_pool *pool, int32_t type, const void *table, int64_t n_rows,
                           int64_t cols, const int32_t *ids, int64_t n_ids, float *out);

/* out = x / rms(x) * weight per row; weight may be NULL, out may alias x. */
NK_API int32_t nk_rmsnorm(nk_pool *pool, float *out, const float *x, const float *weight,
                          int64_t n_rows, int64_t dim, float eps);
/* RoPE modes: NEOX rotates pairs (i, i + head_dim/2), NORM pairs (2i, 2i + 1). */
enum { NK_ROPE_NEOX = 0, NK_ROPE_NORM = 1 };
/* YaRN's terms of a rope (ggml's rope_yarn): pair i's angle mixes the interpolated and the
 * extrapolated angle by ext_factor * ramp_i, the ramp falling from 1 at pair corr_low to 0
 * at corr_high; cos and sin are multiplied by mscale. */
typedef struct {
  float ext_factor, corr_low, corr_high, mscale;
} nk_rope_yarn;
/* In place on x[n_tokens][n_heads][head_dim]: pair i of a token at position p turns by
 * freq_scale * p * freq_base^(-2i/head_dim) / freq_factors[i] (freq_factors may be NULL:
 * all 1), or with `yarn` (NULL: none) by its mix of that and the unscaled angle, the angles
 * computed as ggml computes them. */
NK_API int32_t nk_rope(nk_pool *pool, float *x, int64_t n_tokens, int64_t n_heads,
                       int64_t head_dim, const int32_t *positions, float freq_base,
                       float freq_scale, const float *freq_factors, int32_t mode,
                       const nk_rope_yarn *yarn);

/* Paged KV cache: k_cache and v_cache are [n_blocks][block_size][n_kv_heads][head_dim] of
 * kv_type: NK_F32, NK_F16, or NK_Q8_0 / NK_Q4_0 (each head's row whole ggml blocks of 32,
 * so head_dim % 32 == 0, quantized as ggml's reference quantizers). A step's rows belong to n_seqs sequences: seqs holds a
 * triple (row_start, row_count, table_len) per sequence, tables their block tables one
 * after another (position / block_size -> cache block), positions one entry per row.
 * k and v are [rows][n_kv_heads][head_dim] f32. */
NK_API int32_t nk_kv_store(nk_pool *pool, void *k_cache, void *v_cache, int32_t kv_type,
                           int64_t block_size, int32_t n_seqs, const int32_t *seqs,
                           const int32_t *tables, const int32_t *positions, int64_t n_kv_heads,
                           int64_t head_dim, const float *k, const float *v);
/* out and q are [rows][n_heads][head_dim]; each row attends to its sequence's cache
 * positions 0..positions[row], or with window > 0 only the last `window` of them
 * (positions[row] - window + 1 ..). */
NK_API int32_t nk_attention(nk_pool *pool, float *out, const float *q, const void *k_cache,
                            const void *v_cache, int32_t kv_type, int64_t block_size,
                            int32_t n_seqs, const int32_t *seqs, const int32_t *tables,
                            const int32_t *positions, int64_t n_heads, int64_t n_kv_heads,
                            int64_t head_dim, float scale, int64_t window);

/* out[r] = the index of the largest value of row r of x[rows][cols]: the first of equal
 * ones, NaN never; 0 for a row of NaN. */
NK_API int32_t nk_argmax_rows(nk_pool *pool, const float *x, int64_t rows, int64_t cols,
                              int32_t *out);

/* nk_argmax_rows among the tokens each row allows: masks[r] is row r's bitset (bit i of word
 * i / 32 set: column i allowed), or NULL for all of them; masks itself may be NULL. A masked
 * row whose allowed values are all NaN (or that allows none) gets its first allowed index
 * (0 when none). nk_argmax_rows_masked_ref is its plain scan, on the calling thread. */
NK_API int32_t nk_argmax_rows_masked(nk_pool *pool, const float *x, int64_t rows, int64_t cols,
                                     const uint32_t *const *masks, int32_t *out);
NK_API int32_t nk_argmax_rows_masked_ref(const float *x, int64_t rows, int64_t cols,
                                         const uint32_t *const *masks, int32_t *out);

/* A sampled draw from the logits x[0, n) as src/engine/truncation.ts makes it, token for
 * token (sample.c): the candidates within params[NK_SAMPLE_CUTOFF] (tempered units) of the
 * best logit, top-k, top-p, min-p (0, 1 and 0 are off), and the draw at params[NK_SAMPLE_U]
 * in [0, 1). `table` is exp_table.ts's (e^(-k/256), k = 0..16384) and scratch holds
 * nk_sample_scratch_bytes(n). Returns the token, -1 when no value is a candidate (x[0] or
 * every value NaN). */
enum {
  NK_SAMPLE_TEMPERATURE = 0,
  NK_SAMPLE_CUTOFF = 1,
  NK_SAMPLE_TOP_K = 2,
  NK_SAMPLE_TOP_P = 3,
  NK_SAMPLE_MIN_P = 4,
  NK_SAMPLE_U = 5,
  NK_SAMPLE_PARAMS = 6
};
NK_API int64_t nk_sample_scratch_bytes(int64_t n);
NK_API int64_t nk_sample_draw(const float *x, int64_t n, const double *params, const double *table,
                              uint8_t *scratch);
/* The same draw by plain C alone: the checker's reference for nk_sample_draw's vector pass. */
NK_API int64_t nk_sample_draw_ref(const float *x, int64_t n, const double *params,
                                  const double *table, uint8_t *scratch);
/* nk_sample_draw of rows[which[i]] (each `width` values of the n_rows at rows) with
 * params[i * NK_SAMPLE_PARAMS ...] into out[i], for i < n, the draws spread over the pool
 * (sample_rows.c). */
NK_API int32_t nk_sample_draw_rows(nk_pool *pool, const float *rows, int64_t width,
                                   int64_t n_rows, const int32_t *which, int64_t n,
                                   const double *params, const double *table, int32_t *out);
/* What log-probs need of the logits x[0, n), as sampler.ts's tokenLogprobs computes it:
 * out[0] = the largest value (NaN skipped), out[1] = the sum of e^-(out[0] - x[i]) by the
 * exp table, and the `top` best indices (best first, ties to the lower) in top_ids; returns
 * how many. The caller takes log(out[1]) (its own log, so both ways agree to the bit).
 * _ref is the plain C. */
NK_API int32_t nk_sample_logprobs(const float *x, int64_t n, const double *table, int32_t top,
                                  int32_t *top_ids, double *out);
NK_API int32_t nk_sample_logprobs_ref(const float *x, int64_t n, const double *table, int32_t top,
                                      int32_t *top_ids, double *out);

/* Structured output: walks a vocabulary trie (nodes in depth-first order; node 0 the root)
 * through a grammar automaton's transition table (table[state * 256 + byte]: the next
 * state, -1 dead, below -1 not computed yet), from node `start` on, state_at[0] set by the
 * caller. Sets the bit of every token whose bytes the automaton takes and adds their number
 * to *count. Returns -1 when the walk is done, or the node whose transition is not computed
 * yet (state_at of its parent set): the caller fills it in and calls again from there. */
NK_API int64_t nk_token_mask_walk(const int32_t *table, const uint8_t *label,
                                  const int32_t *parent, const int32_t *subtree_end,
                                  const int32_t *token_start, const int32_t *tokens,
                                  int32_t *state_at, uint32_t *bits, int64_t node_count,
                                  int64_t start, int64_t *count);

/* dst[i] = src[i] where bit i of `bits` is set, -infinity where it is clear (a token a
 * grammar forbids), i in [0, n); dst may be src. Its reference is applyBits in
 * src/constrain/matcher.ts. */
NK_API void nk_token_mask_apply(float *dst, const float *src, const uint32_t *bits, int64_t n);

/* out = silu(gate) * up. */
NK_API int32_t nk_silu_mul(nk_pool *pool, float *out, const float *gate, const float *up,
                           int64_t n);
NK_API int32_t nk_add(nk_pool *pool, float *out, const float *a, const float *b, int64_t n);
/* out = gelu(gate) * up, GELU in its tanh approximation. */
NK_API int32_t nk_gelu_mul(nk_pool *pool, float *out, const float *gate, const float *up,
                           int64_t n);
/* out[r][c] = a[r][c] + bias[c] over n values (whole rows of cols). */
NK_API int32_t nk_add_bias(nk_pool *pool, float *out, const float *a, const float *bias,
                           int64_t n, int64_t cols);
/* out = a * factor over n values. */
NK_API int32_t nk_scale(nk_pool *pool, float *out, const float *a, float factor, int64_t n);
/* Every n values (a power of two dividing cols) of rows x cols floats, in place, times the
 * orthonormal Walsh-Hadamard matrix H[i][j] = (-1)^popcount(i & j) / sqrt(n). */
NK_API int32_t nk_hadamard(nk_pool *pool, float *x, int64_t rows, int64_t cols, int64_t n);

/* Mixture-of-experts routing of n_rows rows of n_experts scores, as llama.cpp's softmax
 * gating computes it: p = softmax(row) (f32, its sum in double), the k experts of highest p
 * in the order of ggml's descending argsort (libstdc++'s std::sort), their p divided by
 * their sum when `normalize` (clamped to at least 2^-14). ids[row][j] gets expert j's index
 * as a float, weights[row][j] its weight. n_experts <= 512. */
NK_API int32_t nk_moe_route(nk_pool *pool, const float *logits, int64_t n_rows, int64_t n_experts,
                            int64_t k, int32_t normalize, float *ids, float *weights);
/* For n (at most 8) stacks of n_experts matrices of one width (matrix m's expert e at
 * ws[m] + e * strides[m] bytes, rows[m] x cols): ys[m][t*k + j] = W_m[ids[t][j]] times x
 * row t (x_rows == n_tokens) or t*k + j (x_rows == n_tokens * k). The rows are grouped
 * by expert, so each chosen expert's weights are read once per call. */
NK_API int32_t nk_matmul_experts(nk_pool *pool, int32_t n, const int32_t *types,
                                 const void *const *ws, const int64_t *strides,
                                 const int64_t *rows, int64_t n_experts, int64_t cols,
                                 const float *x, int64_t x_rows, const float *ids,
                                 int64_t n_tokens, int64_t k, float *const *ys);
/* Same contract for one stack, plain C: nk_matmul_ref on each (token, slot) row. */
NK_API int32_t nk_matmul_experts_ref(nk_pool *pool, int32_t type, const void *w, int64_t stride,
                                     int64_t rows, int64_t n_experts, int64_t cols,
                                     const float *x, int64_t x_rows, const float *ids,
                                     int64_t n_tokens, int64_t k, float *y);
/* out[t] = w[t][0] e[t*k] + w[t][1] e[t*k + 1] + ... over rows of cols: each product
 * rounded to f32, then summed in slot order. */
NK_API int32_t nk_moe_combine(nk_pool *pool, float *out, const float *experts,
                              const float *weights, int64_t n_tokens, int64_t k, int64_t cols);

/* Runs a list of ops recorded by the binding (layout in oplist.c) in order; stops at the
 * first that fails, returning its code with its index in *failed (those before it ran).
 * With `interrupt` set, it also stops before any op once *interrupt differs from `seen`
 * (another thread wrote it), returning NK_EINTERRUPTED with that op's index. With `op_ns`
 * set (a profile), op i's wall time in nanoseconds goes to op_ns[i] as it ends; the
 * entries of ops that did not run are left as they were. */
NK_API int32_t nk_run_ops(nk_pool *pool, const double *ops, int64_t n_words, const int32_t *ints,
                          int32_t *failed, const int32_t *interrupt, int32_t seen,
                          double *op_ns);

NK_API void nk_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
/* Round to nearest even, like F16C. */
NK_API void nk_f32_to_f16(const float *src, uint16_t *dst, int64_t n);

/* How the bandwidth probe's passes read memory: the plain C loop (the reference), the
 * level's widest loads, the same with software prefetch ahead, and non-temporal loads. */
enum {
  NK_READ_PLAIN = 0,
  NK_READ_STREAM = 1,
  NK_READ_PREFETCH = 2,
  NK_READ_NT = 3,
  NK_READ_PATTERNS = 4
};

/* Read bandwidth in GB/s (1e9 bytes/s) of all pool threads reading their share of a buffer
 * of `bytes` on huge pages: the fastest of `iters` passes in each pattern; negative when
 * the buffer cannot be allocated. */
NK_API double nk_bandwidth(nk_pool *pool, uint64_t bytes, int32_t iters);

/* The wrapping sum of the 64-bit words of p[0, bytes) as the probe's `pattern` reads it, all
 * pool threads each reading a share, into *sum. p 8-byte aligned, bytes a multiple of 8. */
NK_API int32_t nk_read_checksum(nk_pool *pool, const void *p, int64_t bytes, int32_t pattern,
                                uint64_t *sum);

#endif
