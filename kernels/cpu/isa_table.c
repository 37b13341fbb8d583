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

/* Where packing a panel starts to pay for itself, measured with whole-model forwards on
 * the 2-core Sapphire Rapids VM: below it, passes of four tokens over the streamed weights
 * are faster. AVX-512 unpacks Q4_K, Q6_K and Q8_0 by fused kernels at a fraction of the
 * generic cost, and Q8_0 streams twice the bytes per weight of Q4_K. */
static int32_t pack_min_tokens(int32_t type) {
#if defined(__AVX512F__)
  if (type == NK_Q4_K || type == NK_Q6_K) return 5;
  if (type == NK_Q8_0) return 8;
#endif
  (void)type;
  return 9;
}

const nk_isa_ops NK_TABLE = {
    .panel_rows = PANEL_ROWS,
    .pack_min_tokens = pack_min_tokens,
    .quantize_act = NK_FN(nk_quantize_act),
    .quantize_act_k = NK_FN(nk_quantize_act_k),
    .unpack = NK_FN(nk_unpack),
    .qdot_rows = NK_FN(nk_qdot_rows),
    .fdot_rows = NK_FN(nk_fdot_rows),
#if PANEL_ROWS
    .qgemm_panel = NK_FN(nk_qgemm_panel),
    .fgemm_panel = NK_FN(nk_fgemm_panel),
#endif
    .rmsnorm_row = NK_FN(nk_rmsnorm_row),
    .silu_mul = NK_FN(nk_silu_mul),
    .gelu_mul = NK_FN(nk_gelu_mul),
    .add = NK_FN(nk_add),
    .rope_apply = NK_FN(nk_rope_apply),
    .attend_item = NK_FN(nk_attend_item),
    .f16_store = NK_FN(nk_f16_store),
    .argmax_span = NK_FN(nk_argmax_span),
    .read_words = NK_FN(nk_read_words),
};
