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

const nk_isa_ops NK_TABLE = {
    .panel_rows = PANEL_ROWS,
    .quantize_act = NK_FN(nk_quantize_act),
    .unpack = NK_FN(nk_unpack),
    .qdot_rows = NK_FN(nk_qdot_rows),
    .fdot_rows = NK_FN(nk_fdot_rows),
#if PANEL_ROWS
    .qgemm_panel = NK_FN(nk_qgemm_panel),
    .fgemm_panel = NK_FN(nk_fgemm_panel),
#endif
    .rmsnorm_row = NK_FN(nk_rmsnorm_row),
    .silu_mul = NK_FN(nk_silu_mul),
    .add = NK_FN(nk_add),
    .rope_token = NK_FN(nk_rope_token),
    .attend_item = NK_FN(nk_attend_item),
    .f16_store = NK_FN(nk_f16_store),
    .argmax_span = NK_FN(nk_argmax_span),
    .read_sum = NK_FN(nk_read_sum),
};
