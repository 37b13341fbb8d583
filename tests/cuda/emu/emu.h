/*
 * Host stand-ins for the CUDA constructs the kernels use, so the kernel sources (kernels/cuda) compile as
 * C++ for the CPU emulator (NEURON_EMU). Every CUDA thread of a block is a fiber
 * (emu_runtime.cc); blocks run one after another on one OS thread, which is why shared
 * memory can be a function-local static. Warp collectives and barriers switch fibers.
 * Only what the kernels use exists here: a kernel that reaches for anything else does not
 * compile, which is the point.
 */
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static

struct uint3 {
  unsigned x, y, z;
};
typedef uint3 dim3;
struct int4 {
  int x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct float2 {
  float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }

extern uint3 emu_thread_idx;
extern dim3 emu_block_idx, emu_block_dim, emu_grid_dim;

#define threadIdx (emu_thread_idx)
#define blockIdx (emu_block_idx)
#define blockDim (emu_block_dim)
#define gridDim (emu_grid_dim)
#define warpSize 32

void emu_syncthreads();
void emu_syncwarp(unsigned mask);
uint64_t emu_warp_exchange(unsigned mask, uint64_t v, int src_lane, bool xor_mode);
void emu_check_align(const void *p, int n, const char *file, int line);

#define __syncthreads() emu_syncthreads()
#define __syncwarp(...) emu_syncwarp(0xffffffffu)
#define EMU_CHECK_ALIGN(p, n) emu_check_align((const void *)(p), (n), __FILE__, __LINE__)

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8, "shuffle of a wide type");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = emu_warp_exchange(mask, bits, lane_mask, true);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src_lane) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = emu_warp_exchange(mask, bits, src_lane, false);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

/* Each lane's predicate as bit `lane`: a butterfly of OR-exchanges, five fiber switches. */
inline unsigned __ballot_sync(unsigned mask, bool pred) {
  uint64_t v = pred ? 1ull << (emu_thread_idx.x & 31) : 0;
  for (int o = 16; o > 0; o >>= 1) v |= emu_warp_exchange(mask, v, o, true);
  return (unsigned)v;
}

inline int __popc(unsigned v) { return __builtin_popcount(v); }

/* Fibers of a block run on one OS thread and switch only at collectives: a plain add. */
inline int atomicAdd(int *p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}

inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; i++) {
    c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
  }
  return c;
}

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __uint_as_float(uint32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
/*
 * Rounded f32 arithmetic that nvcc never fuses into an FMA. The kernels are built with FMA
 * contraction, like nvcc's default (build_emu.ts): the empty asm makes each operand and
 * result a value the host compiler cannot see through, so it cannot fuse them either.
 */
inline float emu_rounded(float v) {
  asm("" : "+x"(v));
  return v;
}
inline float __fmul_rn(float a, float b) { return emu_rounded(emu_rounded(a) * emu_rounded(b)); }
inline float __fadd_rn(float a, float b) { return emu_rounded(emu_rounded(a) + emu_rounded(b)); }
inline float __fdiv_rn(float a, float b) { return emu_rounded(emu_rounded(a) / emu_rounded(b)); }

float emu_f16_to_f32(uint16_t h);
uint16_t emu_f32_to_f16(float f);

/* Kernel registry: every exported kernel registers its entry and parameter sizes. */
typedef void (*EmuCall)(void **params);
int emu_register_kernel(const char *name, EmuCall call, const size_t *sizes, int count);

template <typename F, F f>
struct EmuLauncher;

template <typename... A, void (*f)(A...)>
struct EmuLauncher<void (*)(A...), f> {
  template <size_t... I>
  static void call_impl(void **p, std::index_sequence<I...>) {
    f(*static_cast<typename std::remove_reference<A>::type *>(p[I])...);
  }
  static void call(void **p) { call_impl(p, std::index_sequence_for<A...>{}); }
  static const size_t *sizes() {
    static const size_t s[] = {sizeof(A)..., 0};
    return s;
  }
  static constexpr int count = (int)sizeof...(A);
};

#define EMU_REGISTER(name)                                                          \
  static const int emu_registered_##name = emu_register_kernel(                   \
      #name, &EmuLauncher<decltype(&name), &name>::call,                          \
      EmuLauncher<decltype(&name), &name>::sizes(), EmuLauncher<decltype(&name), &name>::count)
