/*
 * nk_run_ops: a recorded sequence of ops run by one call. The binding records a forward
 * pass op by op and runs it when a result is needed, so the per-op cost of a foreign call
 * (argument conversion and a round trip through the JavaScript engine, microseconds each)
 * is paid once per batch instead of ~420 times per decoded token, and the pool's workers
 * go from one op to the next without waiting on the JavaScript thread.
 *
 * Every word of the list is a double: integers and x86-64 user-space addresses (< 2^47)
 * are exact in one, and the binding then fills a Float64Array without BigInt conversions.
 * Integer arrays (token ids, positions, block tables) are copied into `ints` at record
 * time, so the caller may reuse its own arrays before the list runs; ops refer to them by
 * offset.
 */
#include <stdlib.h>

#include "nk_internal.h"

/* Op codes; each op is [code, words of the whole op, arguments...]. */
enum {
  OP_GET_ROWS = 1,
  OP_RMSNORM = 2,
  OP_MATMUL = 3,
  OP_ROPE = 4,
  OP_KV_STORE = 5,
  OP_ATTENTION = 6,
  OP_SILU_MUL = 7,
  OP_ADD = 8,
  OP_GATHER_ROWS = 9,
  OP_ARGMAX_ROWS = 10,
  OP_GELU_MUL = 11,
  OP_ADD_BIAS = 12,
  OP_SCALE = 13,
  OP_MOE_ROUTE = 14,
  OP_MATMUL_EXPERTS = 15,
  OP_MOE_COMBINE = 16,
  OP_ARGMAX_ROWS_MASKED = 17,
  OP_HADAMARD = 18,
};

#define HEADER 2
#define MATMUL_FIXED 4
#define MATMUL_PER 4
#define MANY_MAX 8
#define EXPERTS_FIXED 8
#define EXPERTS_PER 5
#define ARGMAX_FIXED 4

static int64_t i64(double d) {
  return (int64_t)d;
}

static void *ptr(double d) {
  return (void *)(uintptr_t)(uint64_t)d;
}

static int32_t run_matmul(nk_pool *pool, const double *a, int64_t words) {
  const int64_t n = i64(a[0]);
  if (n < 1 || n > MANY_MAX || words != HEADER + MATMUL_FIXED + n * MATMUL_PER) return NK_EINVAL;
  int32_t types[MANY_MAX];
  const void *ws[MANY_MAX];
  int64_t rows[MANY_MAX];
  float *ys[MANY_MAX];
  for (int64_t m = 0; m < n; m++) {
    const double *p = a + MATMUL_FIXED + m * MATMUL_PER;
    types[m] = (int32_t)i64(p[0]);
    ws[m] = ptr(p[1]);
    rows[m] = i64(p[2]);
    ys[m] = ptr(p[3]);
  }
  return nk_matmul_many(pool, (int32_t)n, types, ws, rows, i64(a[1]), ptr(a[2]), i64(a[3]), ys);
}

static int32_t run_matmul_experts(nk_pool *pool, const double *a, int64_t words) {
  const int64_t n = i64(a[0]);
  if (n < 1 || n > MANY_MAX || words != HEADER + EXPERTS_FIXED + n * EXPERTS_PER) return NK_EINVAL;
  int32_t types[MANY_MAX];
  const void *ws[MANY_MAX];
  int64_t strides[MANY_MAX], rows[MANY_MAX];
  float *ys[MANY_MAX];
  for (int64_t m = 0; m < n; m++) {
    const double *p = a + EXPERTS_FIXED + m * EXPERTS_PER;
    types[m] = (int32_t)i64(p[0]);
    ws[m] = ptr(p[1]);
    strides[m] = i64(p[2]);
    rows[m] = i64(p[3]);
    ys[m] = ptr(p[4]);
  }
  return nk_matmul_experts(pool, (int32_t)n, types, ws, strides, rows, i64(a[1]), i64(a[2]),
                           ptr(a[3]), i64(a[4]), ptr(a[5]), i64(a[6]), i64(a[7]), ys);
}

/* out[i] = a[rows[i]], rows of `cols` floats: the rows a step wants logits of. The binding
 * checks the row indices when it records the op. */
static int32_t gather_rows(float *out, const float *a, int64_t cols, const int32_t *rows,
                           int64_t n) {
  if (!out || !a || cols <= 0 || n < 0) return NK_EINVAL;
  for (int64_t i = 0; i < n; i++) memmove(out + i * cols, a + rows[i] * cols, (size_t)cols * 4);
  return NK_OK;
}

/* Arguments of each fixed-size op, the header excluded. */
static int64_t fixed_words(int32_t code) {
  switch (code) {
    case OP_GET_ROWS: return 7;
    case OP_RMSNORM: return 6;
    case OP_ROPE: return 13;
    case OP_KV_STORE: return 12;
    case OP_ATTENTION: return 15;
    case OP_SILU_MUL: return 4;
    case OP_GELU_MUL: return 4;
    case OP_ADD: return 4;
    case OP_ADD_BIAS: return 5;
    case OP_SCALE: return 4;
    case OP_HADAMARD: return 4;
    case OP_GATHER_ROWS: return 5;
    case OP_ARGMAX_ROWS: return 4;
    case OP_MOE_ROUTE: return 7;
    case OP_MOE_COMBINE: return 6;
    default: return -1;
  }
}

/* [x, rows, cols, out, then each row's mask address (0: unmasked)]. */
static int32_t run_argmax_masked(nk_pool *pool, const double *a, int64_t words) {
  const int64_t rows = i64(a[1]);
  if (rows < 0 || words != HEADER + ARGMAX_FIXED + rows) return NK_EINVAL;
  const uint32_t **masks = malloc(sizeof(*masks) * (size_t)(rows > 0 ? rows : 1));
  if (!masks) return NK_ENOMEM;
  for (int64_t r = 0; r < rows; r++) masks[r] = ptr(a[ARGMAX_FIXED + r]);
  const int32_t rc = nk_argmax_rows_masked(pool, ptr(a[0]), rows, i64(a[2]), masks, ptr(a[3]));
  free(masks);
  return rc;
}

static int32_t run_op(nk_pool *pool, int32_t code, const double *a, int64_t words,
                      const int32_t *ints) {
  if (code == OP_MATMUL) return run_matmul(pool, a, words);
  if (code == OP_MATMUL_EXPERTS) return run_matmul_experts(pool, a, words);
  if (code == OP_ARGMAX_ROWS_MASKED) return run_argmax_masked(pool, a, words);
  if (words != HEADER + fixed_words(code)) return NK_EINVAL;
  switch (code) {
    case OP_GET_ROWS:
      return nk_get_rows(pool, (int32_t)i64(a[0]), ptr(a[1]), i64(a[2]), i64(a[3]),
                         ints + i64(a[4]), i64(a[5]), ptr(a[6]));
    case OP_RMSNORM:
      return nk_rmsnorm(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]), i64(a[4]), (float)a[5]);
    case OP_ROPE: {
      const nk_rope_yarn yarn = {(float)a[9], (float)a[10], (float)a[11], (float)a[12]};
      return nk_rope(pool, ptr(a[0]), i64(a[1]), i64(a[2]), i64(a[3]), ints + i64(a[4]),
                     (float)a[5], (float)a[6], ptr(a[7]), (int32_t)i64(a[8]), &yarn);
    }
    case OP_KV_STORE:
      return nk_kv_store(pool, ptr(a[0]), ptr(a[1]), (int32_t)i64(a[2]), i64(a[3]),
                         (int32_t)i64(a[4]), ints + i64(a[5]), ints + i64(a[6]), ints + i64(a[7]),
                         i64(a[8]), i64(a[9]), ptr(a[10]), ptr(a[11]));
    case OP_ATTENTION:
      return nk_attention(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), ptr(a[3]), (int32_t)i64(a[4]),
                          i64(a[5]), (int32_t)i64(a[6]), ints + i64(a[7]), ints + i64(a[8]),
                          ints + i64(a[9]), i64(a[10]), i64(a[11]), i64(a[12]), (float)a[13],
                          i64(a[14]));
    case OP_SILU_MUL: return nk_silu_mul(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]));
    case OP_GELU_MUL: return nk_gelu_mul(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]));
    case OP_ADD: return nk_add(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]));
    case OP_ADD_BIAS:
      return nk_add_bias(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]), i64(a[4]));
    case OP_SCALE: return nk_scale(pool, ptr(a[0]), ptr(a[1]), (float)a[2], i64(a[3]));
    case OP_HADAMARD: return nk_hadamard(pool, ptr(a[0]), i64(a[1]), i64(a[2]), i64(a[3]));
    case OP_GATHER_ROWS:
      return gather_rows(ptr(a[0]), ptr(a[1]), i64(a[2]), ints + i64(a[3]), i64(a[4]));
    case OP_ARGMAX_ROWS: return nk_argmax_rows(pool, ptr(a[0]), i64(a[1]), i64(a[2]), ptr(a[3]));
    case OP_MOE_ROUTE:
      return nk_moe_route(pool, ptr(a[0]), i64(a[1]), i64(a[2]), i64(a[3]), (int32_t)i64(a[4]),
                          ptr(a[5]), ptr(a[6]));
    case OP_MOE_COMBINE:
      return nk_moe_combine(pool, ptr(a[0]), ptr(a[1]), ptr(a[2]), i64(a[3]), i64(a[4]), i64(a[5]));
    default: return NK_EINVAL;
  }
}

int32_t nk_run_ops(nk_pool *pool, const double *ops, int64_t n_words, const int32_t *ints,
                   int32_t *failed, const int32_t *interrupt, int32_t seen, double *op_ns) {
  if (!pool || !ops || n_words < 0 || !failed) return NK_EINVAL;
  int32_t index = 0;
  for (int64_t at = 0; at < n_words; index++) {
    const int64_t words = at + HEADER <= n_words ? i64(ops[at + 1]) : 0;
    int32_t rc = NK_EINVAL;
    if (interrupt && __atomic_load_n(interrupt, __ATOMIC_RELAXED) != seen) {
      rc = NK_EINTERRUPTED;
    } else if (words >= HEADER && at + words <= n_words) {
      const int64_t t0 = op_ns ? nk_now_ns() : 0;
      rc = run_op(pool, (int32_t)i64(ops[at]), ops + at + HEADER, words, ints);
      if (op_ns) op_ns[index] = (double)(nk_now_ns() - t0);
    }
    if (rc != NK_OK) {
      *failed = index;
      return rc;
    }
    at += words;
  }
  return NK_OK;
}
