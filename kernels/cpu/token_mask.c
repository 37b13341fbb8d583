/*
 * The token-mask walk of structured output (nk_token_mask_walk in nk.h): one pass over the
 * vocabulary trie in depth-first order, a table read per node, a dead prefix skipping its
 * whole subtree. Its reference is the TypeScript walk in src/constrain/token_masks.ts; the
 * checker (src/constrain/token_masks_test.ts) compares the two masks on real grammars.
 */
#include <string.h>

#include "nk.h"

int64_t nk_token_mask_walk(const int32_t *table, const uint8_t *label, const int32_t *parent,
                           const int32_t *subtree_end, const int32_t *token_start,
                           const int32_t *tokens, int32_t *state_at, uint32_t *bits,
                           int64_t node_count, int64_t start, int64_t *count) {
  int64_t found = 0;
  for (int64_t n = start; n < node_count;) {
    const int32_t from = state_at[parent[n]];
    const int32_t to = table[((int64_t)from << 8) | label[n]];
    if (to < -1) {
      *count += found;
      return n;
    }
    if (to == -1) {
      n = subtree_end[n];
      continue;
    }
    state_at[n] = to;
    for (int32_t k = token_start[n]; k < token_start[n + 1]; k++) {
      const uint32_t id = (uint32_t)tokens[k];
      bits[id >> 5] |= 1u << (id & 31);
    }
    found += token_start[n + 1] - token_start[n];
    n++;
  }
  *count += found;
  return -1;
}

/* Word by word: an all-ones word (a plain string's mask is mostly those) is copied, an
 * all-zeros word (a structural state's) is a fill, any other a blend of its 32 logits with
 * -infinity under its bits, which the compiler turns into vector compares. (A mask whose
 * tokens are spread over the vocabulary, as lowercase words are, has a few set bits in most
 * words: visiting each clear bit instead took 4x longer.) The sampler's copy of the row and
 * the mask are one pass. */
void nk_token_mask_apply(float *dst, const float *src, const uint32_t *bits, int64_t n) {
  static const uint32_t bit[32] = {
      1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
      1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
      1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
      1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};
  const uint32_t dead = 0xff800000u; /* -infinity */
  uint32_t *out = (uint32_t *)dst;
  const uint32_t *in = (const uint32_t *)src;
  const int64_t whole = n >> 5;
  for (int64_t w = 0; w < whole; w++) {
    const uint32_t word = bits[w];
    uint32_t *o = out + w * 32;
    const uint32_t *x = in + w * 32;
    if (word == 0xffffffffu) {
      if (o != x) memcpy(o, x, 32 * sizeof(uint32_t));
      continue;
    }
    if (word == 0) {
      for (int i = 0; i < 32; i++) o[i] = dead;
      continue;
    }
    for (int i = 0; i < 32; i++) {
      const uint32_t keep = (word & bit[i]) ? 0xffffffffu : 0;
      o[i] = (x[i] & keep) | (dead & ~keep);
    }
  }
  for (int64_t i = whole * 32; i < n; i++) {
    out[i] = (bits[i >> 5] >> (i & 31)) & 1 ? in[i] : dead;
  }
}
