/* The operation table of one dispatch level. */
#include "isa_common.h"


#define NK_TABLE NK_CAT(nk_ops, NK_ISA_NAME)

#if defined(__AVX512F__)
#define PANEL_ROWS 32
#elif defined(__AVX2__)
#define PANEL_ROWS 16
#else
#define PANEL_ROWS 0
#endif

/* Where packing a panel starts to pay for itself: below it, passes of row_tokens tokens
 * over the streamed weights are faster. Measured on the 2-core AMD EPYC (Zen 4) VM with the
 * kernel bench's Qwen3-0.6B step products (tests/bench/rows_sweep.ts): with AVX-512's row
 * passes of up to eight tokens, Q8_0 and Q4_K_M steps of 5-8 rows cost 15-45% less by rows
 * than by panels, whose packing is most of a product's cost below a few dozen tokens; at
 * nine tokens the two are even (two row passes). The other levels' passes take four, and
 * the same threshold was measured for them before.
 *
 * AVX-512's float rows go four at a time (fdot_rows), and stay cheaper than the float panels
 * far longer. Against panels, products alternating in one process on the 2-core Zen 5 VM:
 * F16 1024 x 1024 at 9 tokens 0.29x the time, 16 0.40x, 32 0.66x, 64 0.95x, 128 1.24x
 * (3072 x 1024 the same); F32 1024 x 1024 at 9 0.34x, 32 0.76x, 64 1.09x. The MoE router
 * (F32, 64 x 1024) of a 16-token step: 26 -> 13 us. */
static int32_t pack_min_tokens(int32_t type) {
#if defined(__AVX512F__)
  if (type == NK_F16 || type == NK_BF16) return 65;
  if (type == NK_F32) return 48;
#endif
  (void)type;
  return 9;
}

const nk_isa_ops NK_TABLE = {
    .panel_rows = PANEL_ROWS,
    .pack_min_tokens = pack_min_tokens,
#if defined(__AVX512F__)
    .row_tokens = NK_ROW_TOKENS_WIDE,
#else
    .row_tokens = NK_ROW_TOKENS,
#endif
    .quantize_act = NK_FN(nk_quantize_act),
    .quantize_act_k = NK_FN(nk_quantize_act_k),
    .unpack = NK_FN(nk_unpack),
    .qdot_rows = NK_FN(nk_qdot_rows),
    .fdot_rows = NK_FN(nk_fdot_rows),
#if defined(__AVX512F__)
    .r16_rows = NK_FN(nk_r16_rows),
#else
    .r16_rows = nk_r16_rows_portable,
#endif
#if PANEL_ROWS
    .qgemm_panel = NK_FN(nk_qgemm_panel),
    .fgemm_panel = NK_FN(nk_fgemm_panel),
#endif
    .rmsnorm_row = NK_FN(nk_rmsnorm_row),
    .silu_mul = NK_FN(nk_silu_mul),
    .gelu_mul = NK_FN(nk_gelu_mul),
    .add = NK_FN(nk_add),
    .rope_apply = NK_FN(nk_rope_apply),
    .hadamard_chunk = NK_FN(nk_hadamard_chunk),
    .attend_item = NK_FN(nk_attend_item),
    .attend_split = NK_FN(nk_attend_split),
    .f16_store = NK_FN(nk_f16_store),
    .argmax_span = NK_FN(nk_argmax_span),
    .read_words = NK_FN(nk_read_words),
};
