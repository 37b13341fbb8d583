/*
 * The token-mask walk of structured output (nk_token_mask_walk in nk.h): one pass over the
 * vocabulary trie in depth-first order, a table read per node, a dead prefix skipping its
 * whole subtree. Its reference is the TypeScript walk in src/constrain/token_masks.ts; the
 * checker (src/constrain/token_masks_test.ts) compares the two masks on real grammars.
 */
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
