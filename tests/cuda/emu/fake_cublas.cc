/*
 * A stand-in libcublas: cublasGemmEx with cuBLAS's column-major semantics (transposes,
 * leading dimensions, f16/f32 operands, f32 compute), computed on the host in double, so
 * the backend's arguments are checked exactly as cuBLAS would read them. The product runs
 * in stream order, when the handle's stream is waited for.
 */
#include <algorithm>

#include "fake_state.h"

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

/* ---- cuBLAS ---- */

struct CublasHandle {
  void *stream = nullptr;
};

int cublasCreate_v2(void **handle) {
  if (ready() != OK) return 1;
  *handle = new CublasHandle();
  return 0;
}

int cublasDestroy_v2(void *handle) {
  delete (CublasHandle *)handle;
  return 0;
}

int cublasSetStream_v2(void *handle, void *stream) {
  if (stream != nullptr && !stream_of(stream)) return 7;
  ((CublasHandle *)handle)->stream = stream;
  return 0;
}

static float load_elem(const void *base, int type, size_t i) {
  if (type == 0) return ((const float *)base)[i];
  return emu_f16_to_f32(((const uint16_t *)base)[i]);
}

/* Column-major C = alpha op(A) op(B) + beta C, as cublasGemmEx defines it. */
static void gemm(int transa, int transb, int m, int n, int k, float alpha, const void *pa,
                 int atype, int lda, const void *pb, int btype, int ldb, float beta, void *pc,
                 int ctype, int ldc) {
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < m; i++) {
      double sum = 0;
      for (int l = 0; l < k; l++) {
        const float a = load_elem(pa, atype, transa == 0 ? i + (size_t)l * lda : l + (size_t)i * lda);
        const float b = load_elem(pb, btype, transb == 0 ? l + (size_t)j * ldb : j + (size_t)l * ldb);
        sum += (double)a * b;
      }
      const size_t at = i + (size_t)j * ldc;
      float prev = 0;
      if (beta != 0.0f) prev = load_elem(pc, ctype, at);
      const float v = (float)(alpha * sum + beta * prev);
      if (ctype == 0) ((float *)pc)[at] = v;
      else ((uint16_t *)pc)[at] = emu_f32_to_f16(v);
    }
  }
}

/* Checks the arguments as cuBLAS does, then queues the product. */
int cublasGemmEx(void *handle, int transa, int transb, int m, int n, int k, const float *alpha,
                 CUdeviceptr A, int atype, int lda, CUdeviceptr B, int btype, int ldb,
                 const float *beta, CUdeviceptr C, int ctype, int ldc, int compute, int algo) {
  (void)algo;
  if (!handle) return 1;
  const Stream *s = stream_of(((CublasHandle *)handle)->stream);
  if (s && s->capturing) return 13;
  if (compute != 68) return 15;
  if ((atype != 0 && atype != 2) || (btype != 0 && btype != 2) || (ctype != 0 && ctype != 2))
    return 15;
  if (m < 0 || n < 0 || k < 0 || (transa != 0 && transa != 1) || (transb != 0 && transb != 1))
    return 7;
  const int a_rows = transa == 0 ? m : k, a_cols = transa == 0 ? k : m;
  const int b_rows = transb == 0 ? k : n, b_cols = transb == 0 ? n : k;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) return 7;
  const size_t ea = atype == 0 ? 4 : 2, eb = btype == 0 ? 4 : 2, ec = ctype == 0 ? 4 : 2;
  if (m == 0 || n == 0) return 0;
  if (!find(A, ea * ((size_t)lda * (a_cols - 1) + a_rows)) ||
      !find(B, eb * ((size_t)ldb * (b_cols - 1) + b_rows)) ||
      !find(C, ec * ((size_t)ldc * (n - 1) + m))) {
    fail_sticky("cublasGemmEx operand outside device memory", E_ILLEGAL_ADDRESS);
    return 14;
  }
  stats.gemms++;
  const float al = *alpha, be = *beta;
  /* Queued on the handle's stream like the launches around it; alpha and beta are read
   * now (host pointer mode), the operands when it runs. */
  issue(((CublasHandle *)handle)->stream, [=]() -> CUresult {
    gemm(transa, transb, m, n, k, al, (const void *)(uintptr_t)A, atype, lda,
         (const void *)(uintptr_t)B, btype, ldb, be, (void *)(uintptr_t)C, ctype, ldc);
    return OK;
  });
  return 0;
}

}  // extern "C"
#pragma GCC visibility pop
