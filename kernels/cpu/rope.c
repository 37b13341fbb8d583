/*
 * nk_rope_neox and the angle tables it rotates by. A position's cos and sin (head_dim / 2
 * of each) are the same in every layer and for q and k alike, so the pool keeps them per
 * position: a step computes each of its positions' 64 cosf/sinf pairs (for a 128-wide
 * head) once instead of twice per layer, which a 512-token prefill chunk felt (3%).
 */
#include <math.h>
#include <stdlib.h>

#include "nk_internal.h"

/* Positions the cache holds at least; a call with more tokens grows it to the power of
 * two above its count, up to ROPE_MAX (beyond, tables that collide are computed per call). */
#define ROPE_MIN 64
#define ROPE_MAX 8192

struct nk_rope_cache {
  int64_t head_dim;
  float freq_base;
  int64_t cap;
  /* The position whose table a slot holds (-1: none) and the call that last wrote it. */
  int32_t *pos;
  uint32_t *stamp;
  uint32_t call;
  /* cap tables of head_dim floats: the cosines, then the sines. */
  float *tab;
};

void nk_rope_cache_free(nk_rope_cache *c) {
  if (!c) return;
  free(c->pos);
  free(c->stamp);
  nk_free(c->tab);
  free(c);
}

/* ggml's angles: theta advances by repeated f32 multiplication, as ggml computes it. */
static void rope_angles(int32_t pos, int64_t head_dim, float freq_base, float *cs) {
  const int64_t half = head_dim / 2;
  const float theta_scale = powf(freq_base, -2.0f / (float)head_dim);
  float theta = (float)pos;
  for (int64_t i = 0; i < half; i++) {
    cs[i] = cosf(theta);
    cs[half + i] = sinf(theta);
    theta *= theta_scale;
  }
}

/* A cache for head_dim and freq_base holding at least `n` positions (emptied when it
 * changes shape); NULL when out of memory. */
static nk_rope_cache *rope_cache(nk_pool *pool, int64_t head_dim, float freq_base, int64_t n) {
  nk_rope_cache *c = nk_pool_rope_cache(pool);
  int64_t cap = ROPE_MIN;
  while (cap < n && cap < ROPE_MAX) cap *= 2;
  if (c && c->head_dim == head_dim && c->freq_base == freq_base && c->cap >= cap) return c;
  if (c && c->cap > cap) cap = c->cap;
  nk_rope_cache *fresh = calloc(1, sizeof(nk_rope_cache));
  if (fresh) {
    *fresh = (nk_rope_cache){head_dim, freq_base, cap, malloc((size_t)cap * sizeof(int32_t)),
                             calloc((size_t)cap, sizeof(uint32_t)), 0,
                             nk_alloc((uint64_t)(cap * head_dim) * sizeof(float))};
  }
  if (!fresh || !fresh->pos || !fresh->stamp || !fresh->tab) {
    nk_rope_cache_free(fresh);
    return NULL;
  }
  for (int64_t s = 0; s < cap; s++) fresh->pos[s] = -1;
  nk_pool_set_rope_cache(pool, fresh);
  return fresh;
}

typedef struct {
  const nk_isa_ops *ops;
  float *x;
  int64_t n_tokens, n_heads, head_dim;
  /* Each token's angle table. */
  const float *const *tables;
} rope_args;

static void rope_task(void *arg, int32_t ith, int32_t nth) {
  const rope_args *r = arg;
  for (int64_t t = ith; t < r->n_tokens; t += nth) {
    r->ops->rope_apply(r->x + t * r->n_heads * r->head_dim, r->n_heads, r->head_dim,
                       r->tables[t]);
  }
}

int32_t nk_rope_neox(nk_pool *pool, float *x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                     const int32_t *positions, float freq_base) {
  if (!pool || !x || !positions || n_tokens < 0 || n_heads <= 0 || head_dim <= 0 ||
      head_dim % 2 != 0 || !(freq_base > 0.0f)) {
    return NK_EINVAL;
  }
  for (int64_t t = 0; t < n_tokens; t++) {
    if (positions[t] < 0) return NK_EINVAL;
  }
  if (n_tokens == 0) return NK_OK;
  nk_rope_cache *c = rope_cache(pool, head_dim, freq_base, n_tokens);
  const float **tables = malloc((size_t)n_tokens * sizeof(float *));
  float *own = NULL;
  int32_t rc = c && tables ? NK_OK : NK_ENOMEM;
  /* The tables are found (or computed) here, on one thread, so no two threads write a
   * slot. A slot another position of this call already holds is left to it: the token
   * gets a table of its own. */
  if (rc == NK_OK) c->call++;
  for (int64_t t = 0; rc == NK_OK && t < n_tokens; t++) {
    const int32_t p = positions[t];
    const int64_t s = p & (c->cap - 1);
    if (c->pos[s] != p && c->stamp[s] == c->call) {
      if (!own) own = malloc((size_t)(n_tokens * head_dim) * sizeof(float));
      if (!own) {
        rc = NK_ENOMEM;
        break;
      }
      rope_angles(p, head_dim, freq_base, own + t * head_dim);
      tables[t] = own + t * head_dim;
      continue;
    }
    float *slot = c->tab + s * head_dim;
    if (c->pos[s] != p) {
      rope_angles(p, head_dim, freq_base, slot);
      c->pos[s] = p;
    }
    c->stamp[s] = c->call;
    tables[t] = slot;
  }
  if (rc == NK_OK) {
    rope_args r = {nk_pool_ops(pool), x, n_tokens, n_heads, head_dim, tables};
    if (n_tokens * n_heads * head_dim < PARALLEL_MIN) {
      rope_task(&r, 0, 1);
    } else {
      nk_pool_run(pool, rope_task, &r);
    }
  }
  free(tables);
  free(own);
  return rc;
}
