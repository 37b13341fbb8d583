/*
 * What sample.c and its AVX-512 candidate pass (kern_avx512_sample.c) share: the
 * exponential of exp_table.ts, which both compute with the same double operations.
 */
#ifndef NK_SAMPLE_H
#define NK_SAMPLE_H

#include <stdint.h>

#define NK_EXP_STEPS 256.0
#define NK_EXP_RANGE 64.0

/* The candidates of x[0, n) (every value >= floor_at, NaN never) appended in id order to
 * ids and logits, with their weights e^-((max - logit) * inverse) when `weights` is not
 * NULL; returns how many. kern_avx512_sample.c. */
int64_t nk_sample_candidates_avx512(const float *x, int64_t n, double floor_at, double max,
                                    double inverse, const double *table, int32_t *ids,
                                    float *logits, double *weights);

/* The largest of `from` and the values of x[0, n) (NaN skipped). */
double nk_sample_max_avx512(const float *x, int64_t n, float from);

/* The sum over x[0, n) of e^-(max - x[i]) (0 for NaN), in sample.c's sum4 order. */
double nk_sample_exp_sum_avx512(const float *x, int64_t n, double max, const double *table);

/* The largest and smallest of x[0, n) (no NaN among them), as doubles. */
void nk_sample_span_avx512(const float *x, int64_t n, double *hi, double *lo);

/* bucket_of[j] = min(last, floor((hi - x[j]) * scale)) for j < n, every x[j] <= hi. */
void nk_sample_buckets_avx512(const float *x, int64_t n, double hi, double scale, int32_t last,
                              uint16_t *bucket_of);

#endif
