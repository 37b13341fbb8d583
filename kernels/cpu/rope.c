/*
 * nk_rope and the angle tables it rotates by. A position's cos and sin (head_dim / 2 of
 * each) are the same in every layer (of one rope) and for q and k alike, so the pool keeps
 * them per position: a step computes each of its positions' 64 cosf/sinf pairs (for a 128-wide
 * head) once instead of twice per layer, which a 512-token prefill chunk felt (3%).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nk_internal.h"

/* Positions the cache holds at least; a call with more tokens grows it to the power of
 * two above its count, up to ROPE_MAX (beyond, tables that collide are computed per call). */
#define ROPE_MIN 64
#define ROPE_MAX 8192

/* The angles of one rope: what a table depends on besides the position. */
typedef struct {
  int64_t head_dim;
  float freq_base, freq_scale;
  /* YaRN (nk_rope): the mix's weight and ramp, and the magnitude. */
  float ext_factor, corr_low, corr_high, mscale;
  /* A copy of the divisors (head_dim / 2), or NULL. */
  float *factors;
} rope_key;

/* Tables for one key. */
typedef struct {
  rope_key key;
  int64_t cap;
  /* The position whose table a slot holds (-1: none) and the call that last wrote it. */
  int32_t *pos;
  uint32_t *stamp;
  uint32_t call;
  /* cap tables of head_dim floats: the cosines, then the sines. */
  float *tab;
} rope_tables;

/* Two keys, so that a model alternating two ropes layer by layer (Gemma 3's local and
 * global layers) finds both. */
#define ROPE_KEYS 2

struct nk_rope_cache {
  rope_tables *t[ROPE_KEYS];
  /* The entry the next new key replaces. */
  int32_t next;
};

static void rope_tables_free(rope_tables *t) {
  if (!t) return;
  free(t->key.factors);
  free(t->pos);
  free(t->stamp);
  nk_free(t->tab);
  free(t);
}

void nk_rope_cache_free(nk_rope_cache *c) {
  if (!c) return;
  for (int i = 0; i < ROPE_KEYS; i++) rope_tables_free(c->t[i]);
  free(c);
}

/* YaRN's ramp over the pairs: 1 below `low` (extrapolated), 0 above `high` (interpolated),
 * linear between, as ggml's rope_yarn_ramp. */
static float rope_ramp(float low, float high, int64_t i) {
  const float y = ((float)i - low) / fmaxf(0.001f, high - low);
  return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* ggml's angles: theta advances by repeated f32 multiplication, is divided by the pair's
 * factor (the extrapolated angle) and scaled (the interpolated one); YaRN mixes the two
 * and scales cos and sin, as ggml's rope cache computes it. */
static void rope_angles(int32_t pos, const rope_key *k, const float *factors, float *cs) {
  const int64_t half = k->head_dim / 2;
  const float theta_scale = powf(k->freq_base, -2.0f / (float)k->head_dim);
  float theta = (float)pos;
  for (int64_t i = 0; i < half; i++) {
    const float extrap = factors ? theta / factors[i] : theta;
    const float interp = k->freq_scale * extrap;
    float angle = interp;
    if (k->ext_factor != 0.0f) {
      const float mix = rope_ramp(k->corr_low, k->corr_high, i) * k->ext_factor;
      angle = interp * (1.0f - mix) + extrap * mix;
    }
    cs[i] = cosf(angle) * k->mscale;
    cs[half + i] = sinf(angle) * k->mscale;
    theta *= theta_scale;
  }
}

static int same_key(const rope_key *a, const rope_key *b) {
  if (a->head_dim != b->head_dim || a->freq_base != b->freq_base ||
      a->freq_scale != b->freq_scale || a->ext_factor != b->ext_factor ||
      a->corr_low != b->corr_low || a->corr_high != b->corr_high || a->mscale != b->mscale ||
      (a->factors == NULL) != (b->factors == NULL)) {
    return 0;
  }
  return !a->factors || memcmp(a->factors, b->factors, (size_t)(a->head_dim / 2) * 4) == 0;
}

/* Tables for `key` holding at least `n` positions (a changed key takes the older entry's
 * place); NULL when out of memory. */
static rope_tables *rope_cache(nk_pool *pool, const rope_key *key, int64_t n) {
  nk_rope_cache *c = nk_pool_rope_cache(pool);
  if (!c) {
    c = calloc(1, sizeof(nk_rope_cache));
    if (!c) return NULL;
    nk_pool_set_rope_cache(pool, c);
  }
  int64_t cap = ROPE_MIN;
  while (cap < n && cap < ROPE_MAX) cap *= 2;
  int32_t slot = -1;
  for (int32_t i = 0; i < ROPE_KEYS; i++) {
    if (c->t[i] && same_key(&c->t[i]->key, key)) slot = i;
  }
  if (slot >= 0 && c->t[slot]->cap >= cap) return c->t[slot];
  if (slot >= 0 && c->t[slot]->cap > cap) cap = c->t[slot]->cap;
  if (slot < 0) {
    slot = c->next;
    c->next = (c->next + 1) % ROPE_KEYS;
  }
  const size_t fbytes = (size_t)(key->head_dim / 2) * 4;
  rope_tables *fresh = calloc(1, sizeof(rope_tables));
  if (fresh) {
    *fresh = (rope_tables){{key->head_dim, key->freq_base, key->freq_scale, key->ext_factor,
                            key->corr_low, key->corr_high, key->mscale,
                            key->factors ? malloc(fbytes) : NULL},
                           cap,
                           malloc((size_t)cap * sizeof(int32_t)),
                           calloc((size_t)cap, sizeof(uint32_t)),
                           0,
                           nk_alloc((uint64_t)(cap * key->head_dim) * sizeof(float))};
  }
  if (!fresh || !fresh->pos || !fresh->stamp || !fresh->tab ||
      (key->factors && !fresh->key.factors)) {
    rope_tables_free(fresh);
    return NULL;
  }
  if (key->factors) memcpy(fresh->key.factors, key->factors, fbytes);
  for (int64_t s = 0; s < cap; s++) fresh->pos[s] = -1;
  rope_tables_free(c->t[slot]);
  c->t[slot] = fresh;
  return fresh;
}

typedef struct {
  const nk_isa_ops *ops;
  float *x;
  int64_t n_tokens, n_heads, head_dim;
  int32_t mode;
  /* Each token's angle table. */
  const float *const *tables;
} rope_args;

/* NORM mode: each head's pairs (2i, 2i + 1), turned by angle i. */
static void rope_apply_norm(float *x, int64_t n_heads, int64_t head_dim, const float *cs) {
  const int64_t half = head_dim / 2;
  const float *cos_t = cs, *sin_t = cs + half;
  for (int64_t h = 0; h < n_heads; h++) {
    float *v = x + h * head_dim;
    for (int64_t i = 0; i < half; i++) {
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
      v[2 * i + 1] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

static void rope_task(void *arg, int32_t ith, int32_t nth) {
  const rope_args *r = arg;
  int64_t t0, t1;
  nk_row_share(r->n_tokens, ith, nth, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) {
    float *x = r->x + t * r->n_heads * r->head_dim;
    if (r->mode == NK_ROPE_NORM) {
      rope_apply_norm(x, r->n_heads, r->head_dim, r->tables[t]);
    } else {
      r->ops->rope_apply(x, r->n_heads, r->head_dim, r->tables[t]);
    }
  }
}

int32_t nk_rope(nk_pool *pool, float *x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                const int32_t *positions, float freq_base, float freq_scale,
                const float *freq_factors, int32_t mode, const nk_rope_yarn *yarn) {
  const nk_rope_yarn none = {0.0f, 0.0f, 0.0f, 1.0f};
  const nk_rope_yarn *y = yarn ? yarn : &none;
  if (!pool || !x || !positions || n_tokens < 0 || n_heads <= 0 || head_dim <= 0 ||
      head_dim % 2 != 0 || !(freq_base > 0.0f) || !(freq_scale > 0.0f) ||
      !isfinite(freq_scale) || (mode != NK_ROPE_NEOX && mode != NK_ROPE_NORM) ||
      !isfinite(y->ext_factor) || !isfinite(y->corr_low) || !isfinite(y->corr_high) ||
      !(y->mscale > 0.0f) || !isfinite(y->mscale)) {
    return NK_EINVAL;
  }
  for (int64_t t = 0; t < n_tokens; t++) {
    if (positions[t] < 0) return NK_EINVAL;
  }
  if (freq_factors) {
    for (int64_t i = 0; i < head_dim / 2; i++) {
      if (!(freq_factors[i] > 0.0f) || !isfinite(freq_factors[i])) return NK_EINVAL;
    }
  }
  if (n_tokens == 0) return NK_OK;
  const rope_key key = {head_dim,     freq_base,    freq_scale, y->ext_factor,
                        y->corr_low,  y->corr_high, y->mscale,  (float *)freq_factors};
  rope_tables *c = rope_cache(pool, &key, n_tokens);
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
      rope_angles(p, &key, freq_factors, own + t * head_dim);
      tables[t] = own + t * head_dim;
      continue;
    }
    float *slot = c->tab + s * head_dim;
    if (c->pos[s] != p) {
      rope_angles(p, &key, freq_factors, slot);
      c->pos[s] = p;
    }
    c->stamp[s] = c->call;
    tables[t] = slot;
  }
  if (rc == NK_OK) {
    rope_args r = {nk_pool_ops(pool), x, n_tokens, n_heads, head_dim, mode, tables};
    nk_pool_run_sized(pool, rope_task, &r, n_tokens * n_heads * head_dim);
  }
  free(tables);
  free(own);
  return rc;
}
