/*
 * The launch limits the real driver enforces, from the kernels' own numbers (emu_limits.h):
 * a block no larger than the PTX's .maxntid; registers for every warp of the block within
 * the register file (allocated per warp in units of 256, i.e. 8 per thread); dynamic shared
 * memory up to 48 KiB, or up to what cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
 * opted into, static and dynamic together within the device's opt-in limit.
 */
#include <cstring>

#include "fake_state.h"

namespace fake {

int shared_optin_limit() { return cfg.cc_major == 9 || cfg.cc_major == 10 ? 227 * 1024 : 99 * 1024; }

const EmuLimits *limits_of(int arch, const char *name) {
  for (int i = 0; i < emu_limits_count; i++) {
    if (emu_limits[i].arch == arch && std::strcmp(emu_limits[i].name, name) == 0) return &emu_limits[i];
  }
  return nullptr;
}

static int round_up(int v, int unit) { return (v + unit - 1) / unit * unit; }

CUresult launch_limits(const Function &f, unsigned threads, unsigned shmem) {
  if (shmem > (unsigned)f.max_dynamic_shared) return E_INVALID_VALUE;
  const EmuLimits *l = f.limits;
  if (l == nullptr) return OK;
  if (threads > (unsigned)l->max_threads) return E_INVALID_VALUE;
  if ((long)shmem + l->static_shared > shared_optin_limit()) return E_INVALID_VALUE;
  const long regs = (long)round_up(l->registers, 8) * round_up((int)threads, 32);
  if (regs > cfg.regs_per_block) return E_LAUNCH_OUT_OF_RESOURCES;
  return OK;
}

}  // namespace fake

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

enum {
  FUNC_MAX_THREADS_PER_BLOCK = 0,
  FUNC_SHARED_SIZE_BYTES = 1,
  FUNC_NUM_REGS = 4,
  FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
};

CUresult cuFuncGetAttribute(int *v, int attrib, void *fn) {
  if (CUresult r = ready()) return r;
  if (!fn || !v) return E_INVALID_VALUE;
  const Function &f = *(const Function *)fn;
  const EmuLimits *l = f.limits;
  switch (attrib) {
    case FUNC_MAX_THREADS_PER_BLOCK: {
      int most = l ? l->max_threads : 1024;
      if (l) {
        /* Whole warps whose registers fit the register file. */
        const int warps = cfg.regs_per_block / (round_up(l->registers, 8) * 32);
        if (warps * 32 < most) most = warps * 32;
      }
      *v = most;
      return OK;
    }
    case FUNC_SHARED_SIZE_BYTES: *v = l ? l->static_shared : 0; return OK;
    case FUNC_NUM_REGS: *v = l ? l->registers : 0; return OK;
    case FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f.max_dynamic_shared; return OK;
    default: return E_INVALID_VALUE;
  }
}

CUresult cuFuncSetAttribute(void *fn, int attrib, int value) {
  if (CUresult r = ready()) return r;
  if (!fn) return E_INVALID_HANDLE;
  Function &f = *(Function *)fn;
  switch (attrib) {
    case FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES: {
      const int room = shared_optin_limit() - (f.limits ? f.limits->static_shared : 0);
      if (value < 0 || value > room) return E_INVALID_VALUE;
      f.max_dynamic_shared = value;
      return OK;
    }
    case FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT:
      return value >= -1 && value <= 100 ? OK : E_INVALID_VALUE;
    default: return E_INVALID_VALUE;
  }
}

}  // extern "C"
#pragma GCC visibility pop
