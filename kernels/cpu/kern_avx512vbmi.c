/*
 * The AVX-512 level with VBMI (Ice Lake on): the same operations, but Q4_K's mat-vec built
 * with VPERMB picking its scale vectors (kern_avx512_q4k.h). Its table is the AVX-512 one
 * with that entry replaced.
 */
#include <pthread.h>

#include "kern_avx512_q4k.h"

void nk_qdot_rows_avx512vbmi(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  if (mm->type == NK_Q4_K && mm->act.dk) {
    q4k_rows(mm, r0, r1, t0, nt);
    return;
  }
  nk_qdot_rows_avx512(mm, r0, r1, t0, nt);
}

static nk_isa_ops table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void) {
  table = nk_ops_avx512;
  table.qdot_rows = nk_qdot_rows_avx512vbmi;
}

const nk_isa_ops *nk_ops_avx512vbmi(void) {
  pthread_once(&table_once, fill_table);
  return &table;
}
