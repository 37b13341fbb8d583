/*
 * Packing a panel of weight rows for the mat-mat kernels (layouts in isa_common.h): done
 * once per panel and call, then reused by every token tile, so its cost fades with the
 * number of tokens.
 */
#include "isa_common.h"

void NK_FN(nk_pack_qpanel)(const nk_mm *mm, int64_t r0, int32_t panel_rows, uint8_t *u, float *s,
                           float *m) {
  const int64_t n_chunks = mm->kp / NK_CHUNK;
  const int32_t per_chunk = NK_CHUNK / mm->tr->group;
  const int32_t step = mm->tr->group / 16;
  nk_chunk c;
  for (int32_t r = 0; r < panel_rows; r++) {
    const int64_t row = r0 + r;
    if (row >= mm->rows) {
      for (int64_t k4 = 0; k4 < mm->kp / 4; k4++) memset(u + (k4 * panel_rows + r) * 4, 0, 4);
      for (int64_t g = 0; g < n_chunks * per_chunk; g++) {
        s[g * panel_rows + r] = 0.0f;
        m[g * panel_rows + r] = 0.0f;
      }
      continue;
    }
    const uint8_t *src = mm->w + row * mm->row_bytes;
    for (int64_t ch = 0; ch < n_chunks; ch++) {
      NK_FN(nk_unpack)(mm->type, src, ch, mm->cols, &c);
      for (int32_t k4 = 0; k4 < NK_CHUNK / 4; k4++) {
        memcpy(u + ((ch * (NK_CHUNK / 4) + k4) * panel_rows + r) * 4, c.u + 4 * k4, 4);
      }
      for (int32_t g = 0; g < per_chunk; g++) {
        s[(ch * per_chunk + g) * panel_rows + r] = c.s[g * step];
        m[(ch * per_chunk + g) * panel_rows + r] = c.m[g * step];
      }
    }
  }
}

void NK_FN(nk_pack_fpanel)(const nk_mm *mm, int64_t r0, int32_t panel_rows, float *w) {
  float buf[NK_CHUNK];
  for (int32_t r = 0; r < panel_rows; r++) {
    const int64_t row = r0 + r;
    if (row >= mm->rows) {
      for (int64_t k = 0; k < mm->cols; k++) w[k * panel_rows + r] = 0.0f;
      continue;
    }
    const uint8_t *src = mm->w + row * mm->row_bytes;
    for (int64_t k0 = 0; k0 < mm->cols; k0 += NK_CHUNK) {
      const int64_t n = mm->cols - k0 < NK_CHUNK ? mm->cols - k0 : NK_CHUNK;
      const float *vals = buf;
      if (mm->type == NK_F32) {
        vals = (const float *)src + k0;
      } else if (mm->type == NK_F16) {
        nk_f16_row((const uint16_t *)src + k0, buf, n);
      } else {
        for (int64_t i = 0; i < n; i++) buf[i] = nk_bf16_to_f32_1(((const uint16_t *)src)[k0 + i]);
      }
      for (int64_t i = 0; i < n; i++) w[(k0 + i) * panel_rows + r] = vals[i];
    }
  }
}
