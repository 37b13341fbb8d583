/*
 * Internals shared by the kernel sources: type traits, the ggml block layouts, f16
 * conversion, the thread pool's task interface and the per-ISA operation table.
 *
 * Quantized matrices are computed through one intermediate form, the "chunk": 256 weights
 * of a row as unsigned bytes u with a scale s and an offset m per group of 16, so that
 * w[i] = s[i/16] * u[i] + m[i/16]. Every quantized type unpacks to it exactly (offsets such
 * as Q4_0's -8 or Q8_0's -128 fold into m), so one int8 dot-product kernel per ISA serves
 * all types, with activations quantized to int8 per 32 values. The mat-mat kernels pack
 * panels from it; AVX-512 mat-vec has kernels fused per type that skip it, with the same
 * arithmetic.
 */
#ifndef NK_INTERNAL_H
#define NK_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "nk.h"
#include "nk_attention.h"

#define NK_CHUNK 256
#define NK_GROUPS 16
#define NK_ALIGN 64
#define NK_MAX_THREADS 256
/* Marks nk_cpu_features' cached answer as computed (no feature uses this bit). */
#define NK_CPU_DETECTED (1u << 31)

typedef struct {
  int32_t block_size; /* values per block */
  int32_t type_size;  /* bytes per block */
  int32_t quant;      /* 1: int8 path through the chunk form; 0: float type */
  int32_t group;      /* finest scale granularity of the chunk form: 16 or 32 */
  int32_t wide;       /* u can exceed 127 (needs care with saturating 16-bit products) */
  int32_t r16;        /* repacked sixteen rows at a time (repack.c): row_bytes is a mean */
} nk_traits;

/* NULL for a type the library does not compute. */
const nk_traits *nk_type_traits(int32_t type);
/* The ggml type a repacked type (NK_*_R16) was repacked from; -1 for any other. */
int32_t nk_r16_base(int32_t type);
/* The repacked layouts (repack.c): bytes per block of a group of sixteen rows and where
 * each part of it starts. */
enum {
  NK_R16_Q8_0_BLOCK = 544,
  NK_R16_Q8_0_QS = 32,
  NK_R16_Q4_K_BLOCK = 2368,
  NK_R16_Q4_K_DMIN = 32,
  NK_R16_Q4_K_SCALES = 64,
  NK_R16_Q4_K_MINS = 192,
  NK_R16_Q4_K_QS = 320,
  NK_R16_Q6_K_BLOCK = 3360,
  NK_R16_Q6_K_SCALES = 32,
  NK_R16_Q6_K_QS = 288,
};

/* ggml's block layouts (ggml-common.h); f16 fields as raw bits. */
typedef struct {
  uint16_t d;
  uint8_t qs[16];
} nk_block_q4_0;
typedef struct {
  uint16_t d, m;
  uint8_t qs[16];
} nk_block_q4_1;
typedef struct {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
} nk_block_q5_0;
typedef struct {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
} nk_block_q5_1;
typedef struct {
  uint16_t d;
  int8_t qs[32];
} nk_block_q8_0;
typedef struct {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
} nk_block_q2_k;
typedef struct {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
} nk_block_q3_k;
typedef struct {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
} nk_block_q4_k;
typedef struct {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
} nk_block_q5_k;
typedef struct {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
} nk_block_q6_k;

static inline float nk_f16_to_f32_1(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    /* Subnormal: value = man * 2^-24, exact in f32. */
    float v = (float)man * 5.9604644775390625e-08f;
    memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t nk_f32_to_f16_1(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds past 65504 */
  if (ax < 0x38800000) {
    /* Subnormal or zero: round ax * 2^24 to an integer, ties to even. */
    float a;
    memcpy(&a, &ax, 4);
    const float scaled = a * 16777216.0f;
    uint32_t m = (uint32_t)scaled;
    const float rem = scaled - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
    return (uint16_t)(sign | m);
  }
  const uint32_t mant = ax & 0x7fffff;
  uint32_t h = ((ax >> 23) - 112) << 10 | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static inline float nk_bf16_to_f32_1(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* One row's 256-value chunk in the form described above. */
typedef struct {
  _Alignas(NK_ALIGN) uint8_t u[NK_CHUNK];
  _Alignas(NK_ALIGN) float s[NK_GROUPS];
  _Alignas(NK_ALIGN) float m[NK_GROUPS];
} nk_chunk;

/* Activations quantized to int8: for token t, q[t*kp + i] and each group of 16 (32) has
 * the scale d16 (d32) of its block and s16 (s32) = that scale * sum of its q. kp is cols
 * rounded up to whole chunks, zero-padded. Blocks are 32 values, or 256 for products with
 * K-quant weights only (ggml's Q8_K, what llama.cpp takes for them): then dk is each
 * block's scale, bsum the integer sums per 16 (bsum32 per 32), and q4k the q of each 128
 * reordered as Q4_K's nibbles lie (values 0-31, 64-95, 32-63, 96-127); dk is NULL otherwise.
 * Every kernel reads the per-16/32 fields, whatever the block; the integer K-quant kernels
 * need the per-256 ones. */
typedef struct {
  int8_t *q;
  float *d16, *s16, *d32, *s32;
  float *dk;
  int16_t *bsum, *bsum32;
  int8_t *q4k;
  int64_t kp;
} nk_qact;


/* One matrix product in flight. */
typedef struct {
  int32_t type;
  const nk_traits *tr;
  const uint8_t *w;
  int64_t rows, cols, row_bytes, kp;
  const float *x;
  int64_t n_tokens;
  float *y;
  /* Token t's results go to row y_rows[t] of y (NULL: row t). Only the repacked kernels
   * (r16_rows) honour it: nk_matmul_experts writes each expert's rows straight into their
   * slots with it. */
  const int32_t *y_rows;
  nk_qact act;
  /* How far ahead of the bytes being computed lines, and whole pages (0: none), are
   * prefetched (NK_LINE_AHEAD_HUGE and the others below). */
  int64_t line_ahead, page_ahead;
} nk_mm;

/* Where token t's results start (nk_mm's y_rows). */
static inline float *nk_y_row(const nk_mm *mm, int64_t t) {
  return mm->y + (mm->y_rows ? mm->y_rows[t] : t) * mm->rows;
}

/* The product of W (`type`, rows x cols, read in place) with n_tokens rows of x into y;
 * the activations' quantized form is left to the caller. NK_EINVAL when W's type or
 * shape is not computable or an operand is missing. */
int32_t nk_mm_setup(nk_mm *mm, int32_t type, const void *w, int64_t rows, int64_t cols,
                    const float *x, int64_t n_tokens, float *y);
/* Bytes of the quantized activations of n_tokens rows (kp values each), with the per-256
 * fields or not, and their layout at buf. */
int64_t nk_qact_bytes(int64_t n_tokens, int64_t kp, int per_256);
void nk_qact_place(uint8_t *buf, int64_t n_tokens, int64_t kp, int per_256, nk_qact *act);
/* The part of act from token t0 on. */
nk_qact nk_qact_from(const nk_qact *act, int64_t t0);
/* Copies token t of src to token i of dst (the same kp and fields). */
void nk_qact_copy(const nk_qact *src, int64_t t, const nk_qact *dst, int64_t i);
/* Quantizes every row of mm->x into mm->act: a few on the calling thread, more over the
 * pool. */
void nk_mm_quantize(nk_pool *pool, const nk_mm *mm);
/* Rows of mm one work item of the row-by-row path takes: about 16 KiB of weights, small
 * enough that a thread finishing early takes over the rest of another's share within a few
 * microseconds; repacked matrices go by whole groups of sixteen (repack.c). */
int64_t nk_item_rows(const nk_mm *mm);

/* The monotonic clock in nanoseconds. */
static inline int64_t nk_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Below this many values an op runs on the calling thread only: waking the workers costs
 * more than a decode step's norms and adds. */
#define PARALLEL_MIN 32768

#include "nk_prefetch.h"

/* Experts a mixture-of-experts layer may have (llama.cpp's LLAMA_MAX_EXPERTS). */
#define NK_MAX_EXPERTS 512

/* Per-ISA operations. qgemm/fgemm work on panels of `panel_rows` rows packed into
 * `scratch`; a level without them (scalar) computes row by row at every size. */
typedef struct {
  int32_t panel_rows;
  /* From how many tokens on a matrix of the type goes through the panels. */
  int32_t (*pack_min_tokens)(int32_t type);
  void (*quantize_act)(const float *x, int64_t cols, int64_t kp, int8_t *q, float *d16, float *s16,
                       float *d32, float *s32);
  /* Token row x (cols values) into the per-256 form of act, as token t (isa_quantize_k.c). */
  void (*quantize_act_k)(const float *x, int64_t cols, const nk_qact *act, int64_t t);
  void (*unpack)(int32_t type, const uint8_t *row, int64_t chunk, int64_t cols, nk_chunk *c);
  /* Rows [r0, r1) for tokens [t0, t0 + nt), nt <= row_tokens (quantized) or
   * NK_ROW_TOKENS (float). */
  int32_t row_tokens;
  void (*qdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);
  void (*fdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);
  /* Rows [r0, r1) (multiples of 16) of a repacked matrix for all its tokens (levels
   * without a kernel for them take nk_r16_rows_portable). */
  void (*r16_rows)(const nk_mm *mm, int64_t r0, int64_t r1);
  /* All tokens for the panel of rows starting at r0. */
  void (*qgemm_panel)(const nk_mm *mm, int64_t r0, void *scratch);
  void (*fgemm_panel)(const nk_mm *mm, int64_t r0, void *scratch);
  void (*rmsnorm_row)(float *out, const float *x, const float *w, int64_t dim, float eps);
  void (*silu_mul)(float *out, const float *gate, const float *up, int64_t n);
  void (*gelu_mul)(float *out, const float *gate, const float *up, int64_t n);
  void (*add)(float *out, const float *a, const float *b, int64_t n);
  void (*rope_apply)(float *x, int64_t n_heads, int64_t head_dim, const float *cs);
  /* n values (a power of two) times the Walsh-Hadamard matrix and `norm` (isa_hadamard.c). */
  void (*hadamard_chunk)(float *x, int64_t n, float norm);
  /* Tokens [t0, t0 + nt), nt <= nk_attn_tile_tokens(a), for kv head kvh. */
  void (*attend_item)(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh, float *scratch);
  /* A decode sequence (at most NK_ATTN_SPLIT_ROWS query rows per kv head) over positions
   * [p_begin, p_end), all kv heads: the rows into a->out, or with `part` their partial
   * softmax (nk_attn_part_put) for a merge with the other spans'. */
  void (*attend_split)(const nk_attn *a, int64_t p_begin, int64_t p_end, float *scratch,
                       float *part);
  void (*f16_store)(uint16_t *dst, const float *src, int64_t n);
  void (*argmax_span)(const float *x, int64_t n, float *best, int64_t *at);
  /* The wrapping sum of the 64-bit words of [p, p + n) read in an NK_READ_* pattern other
   * than NK_READ_PLAIN (isa_read.c); p 8-byte aligned, n a multiple of 8. */
  uint64_t (*read_words)(const uint8_t *p, int64_t n, int32_t pattern);
} nk_isa_ops;

/* Quantizes the row of mm->cols values at x into token t of mm->act. */
void nk_mm_quantize_row(const nk_isa_ops *ops, const nk_mm *mm, const float *x, int64_t t);

/* Repacked rows [r0, r1) for all tokens in plain C (repack.c). */
void nk_r16_rows_portable(const nk_mm *mm, int64_t r0, int64_t r1);

/* Tokens the row kernels take at once: fdot_rows, and qdot_rows at most levels. AVX-512's
 * qdot_rows takes up to NK_ROW_TOKENS_WIDE: a pass of 5-8 tokens (a k = 4..7 speculative
 * verification, a small decode batch) reads and decodes each weight once instead of twice. */
#define NK_ROW_TOKENS 4
#define NK_ROW_TOKENS_WIDE 8

/* Rows [r0, r1) of mm for all its tokens, row by row. `*last` is where the caller's previous
 * rows ended: the kernels prefetch ahead of the rows they compute, so a jump needs a head
 * start. */
static inline void nk_mm_rows(const nk_isa_ops *ops, const nk_mm *mm, int64_t r0, int64_t r1,
                              const uint8_t **last) {
  const uint8_t *p = mm->w + r0 * mm->row_bytes;
  if (p != *last) {
    for (int64_t o = 0; o < mm->line_ahead; o += 64) __builtin_prefetch(p + o, 0, 3);
  }
  *last = mm->w + r1 * mm->row_bytes;
  if (mm->tr->r16) {
    ops->r16_rows(mm, r0, r1);
    return;
  }
  const int32_t per = mm->tr->quant ? ops->row_tokens : NK_ROW_TOKENS;
  for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += per) {
    const int64_t left = mm->n_tokens - t0;
    const int32_t nt = (int32_t)(left < per ? left : per);
    if (mm->tr->quant) {
      ops->qdot_rows(mm, r0, r1, t0, nt);
    } else {
      ops->fdot_rows(mm, r0, r1, t0, nt);
    }
  }
}

extern const nk_isa_ops nk_ops_scalar;
extern const nk_isa_ops nk_ops_avx2;
extern const nk_isa_ops nk_ops_avx512;
/* The AVX-512 table with VBMI kernels where they pay (kern_avx512vbmi.c). */
const nk_isa_ops *nk_ops_avx512vbmi(void);

/* Scratch bytes a panel kernel needs for a k-padded width kp. */
int64_t nk_qpanel_bytes(int32_t panel_rows, int64_t kp);
int64_t nk_fpanel_bytes(int32_t panel_rows, int64_t cols);

/* Thread pool: fn(arg, ith, nth) runs on every thread (the caller is ith 0). */
typedef void (*nk_task_fn)(void *arg, int32_t ith, int32_t nth);
void nk_pool_run(nk_pool *pool, nk_task_fn fn, void *arg);
/* nk_pool_run for an op over `values` values: below PARALLEL_MIN, fn(arg, 0, 1) on the
 * calling thread alone, since waking the workers would cost more than the op. */
void nk_pool_run_sized(nk_pool *pool, nk_task_fn fn, void *arg, int64_t values);
/* Work items for dynamic scheduling inside a task: returns 0, 1, 2, ... across threads;
 * reset by every nk_pool_run. */
int64_t nk_pool_next(nk_pool *pool);
/* Static split with stealing, for work that streams memory: nk_pool_split, before
 * nk_pool_run, gives each thread a contiguous share of items [0, n_items); inside the task
 * nk_pool_claim returns thread ith's items in order, then items taken from the end of the
 * share with the most left, and -1 when none are left. A thread thus walks one stretch of
 * memory (its prefetches stay useful) and nobody idles while work remains.
 * small_items (the products' 16 KiB items): a thief takes half of what is left at once (in
 * order, and no longer stealable), where taking one item at a time moved the victim's line
 * across cores and back for every item. Measured on the 2-core Zen 5 VM against one at a
 * time, libraries alternating in one process (Qwen3-0.6B Q4_K_M and Q8_0, 200-400 pairs):
 * a decode step 0.96-0.98x the time, a k = 4 verification 0.96-0.98x, 16-row batches
 * 0.99x, a 256-token prompt 1.00x. Attention's spans (tens of microseconds each) keep
 * single thefts: with runs the victim idled while the thief worked through half its share,
 * 1.10x the step at 4096 positions. */
void nk_pool_split(nk_pool *pool, int64_t n_items, int small_items);
int64_t nk_pool_claim(nk_pool *pool, int32_t ith);
const nk_isa_ops *nk_pool_ops(const nk_pool *pool);
/* Sets mm's prefetch distances for this pool's weights (nk_pool_set_page_prefetch). */
void nk_pool_prefetch_distances(const nk_pool *pool, nk_mm *mm);
/* Grows the per-thread scratch to at least `bytes` each; 0 or NK_ENOMEM. */
int32_t nk_pool_reserve(nk_pool *pool, int64_t bytes);
void *nk_pool_scratch(nk_pool *pool, int32_t ith);
/* Grows the pool's shared buffer; NULL when out of memory. */
void *nk_pool_shared(nk_pool *pool, int64_t bytes);
/* RoPE's angle tables by position (rope.c), kept by the pool, which frees them. */
typedef struct nk_rope_cache nk_rope_cache;
nk_rope_cache *nk_pool_rope_cache(nk_pool *pool);
/* Replaces (and frees) the pool's tables. */
void nk_pool_set_rope_cache(nk_pool *pool, nk_rope_cache *cache);
void nk_rope_cache_free(nk_rope_cache *cache);

static inline int64_t nk_round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

/* Thread ith's share of n rows, [*r0, *r1): one run of neighbours. Rows dealt out in turn
 * (ith, ith + nth, ...) or claimed one by one ran 2-4x slower on two threads than on one
 * on the 2-core Zen 5 VM, cache lines going back and forth between the cores where each
 * writes beside the other: RMSNorm of 256 rows of 128 (a 16-token step's query norms) 20
 * us against 4.6 alone, 4.3 shared so; the MoE sum of 16 tokens 17 us against 10.6 alone,
 * 7 shared so. In a 16-stream qwen3moe-mini step the norms went from 0.91 to 0.63 ms, RoPE
 * 0.30 to 0.13, the MoE sum 0.57 to 0.30. */
static inline void nk_row_share(int64_t n, int32_t ith, int32_t nth, int64_t *r0, int64_t *r1) {
  *r0 = n * ith / nth;
  *r1 = n * (ith + 1) / nth;
}

#endif
