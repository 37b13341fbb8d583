/*
 * The CPU emulator's execution model: a kernel launch runs its blocks one after another;
 * inside a block every CUDA thread is a fiber with its own stack, switched with a few
 * instructions of assembly (swapcontext costs a system call per switch). A fiber runs until
 * it reaches __syncthreads, a warp collective or its end; the scheduler then releases
 * barriers whose participants have all arrived. Misuse that real hardware punishes with
 * undefined behaviour is an error here: a barrier some threads never reach (deadlock), a
 * full-mask shuffle with an exited lane, a misaligned multi-byte load.
 */
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "emu.h"
#include "emu_runtime.h"
#include "emu_schedule.h"

#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch is written for x86-64"
#endif

/* Saves the callee-saved registers on the current stack, stores the stack pointer in
 * *save, switches to `load` and restores what was saved there. */
extern "C" void emu_switch(void **save, void *load);
asm(R"(
  .text
  .globl emu_switch
  .hidden emu_switch
  .type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");

enum FiberState { RUNNING, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

struct EmuFiber {
  void *sp;
  uint3 tid;
  int lane, warp;
  FiberState state;
  uint64_t round;
};

struct WarpBuffers {
  uint64_t slot[2][32];
};

namespace {
EmuFiber *emu_cur = nullptr;
}
uint3 emu_thread_idx;
dim3 emu_block_idx, emu_block_dim, emu_grid_dim;

namespace {

const size_t STACK_BYTES = 64 * 1024;
const size_t PAGE = 4096;
const int MAX_THREADS = 1024;

struct Runtime {
  char *stacks = nullptr;
  EmuFiber fibers[MAX_THREADS];
  WarpBuffers warps[MAX_THREADS / 32];
  int n = 0;
  void *scheduler_sp = nullptr;
  EmuCall call = nullptr;
  void **params = nullptr;
  std::string error;
};

Runtime *rt = nullptr;

Runtime &runtime() {
  if (rt == nullptr) {
    rt = new Runtime();
    const size_t per = STACK_BYTES + PAGE;
    void *mem = mmap(nullptr, per * MAX_THREADS, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
      std::fprintf(stderr, "emu: cannot map fiber stacks\n");
      std::abort();
    }
    rt->stacks = (char *)mem;
    /* A guard page below each stack turns an overflow into a crash, not corruption. */
    for (int i = 0; i < MAX_THREADS; i++) mprotect(rt->stacks + i * per, PAGE, PROT_NONE);
  }
  return *rt;
}

void fail(const std::string &message) {
  Runtime &r = runtime();
  if (r.error.empty()) r.error = message;
}

void yield_to_scheduler() {
  Runtime &r = runtime();
  emu_switch(&emu_cur->sp, r.scheduler_sp);
}

void trampoline() {
  Runtime &r = runtime();
  r.call(r.params);
  emu_cur->state = DONE;
  emu_switch(&emu_cur->sp, r.scheduler_sp);
  __builtin_unreachable();
}

void init_fiber(Runtime &r, int i, const dim3 &block) {
  EmuFiber &f = r.fibers[i];
  f.tid = uint3{(unsigned)(i % block.x), (unsigned)((i / block.x) % block.y),
                (unsigned)(i / (block.x * block.y))};
  f.lane = i % 32;
  f.warp = i / 32;
  f.state = RUNNING;
  f.round = 0;
  const size_t per = STACK_BYTES + PAGE;
  uintptr_t top = (uintptr_t)(r.stacks + i * per + per);
  top &= ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = nullptr;                      /* trampoline's own return address slot */
  *--sp = (void *)&trampoline;          /* where emu_switch's ret lands */
  for (int k = 0; k < 6; k++) *--sp = nullptr; /* rbp, rbx, r12-r15 */
  f.sp = sp;
}

/* Releases warp barriers whose 32 lanes have all arrived. */
bool release_warps(Runtime &r) {
  bool released = false;
  for (int w = 0; w * 32 < r.n; w++) {
    int waiting = 0, running = 0;
    for (int l = 0; l < 32; l++) {
      const int i = w * 32 + l;
      if (i >= r.n) break;
      if (r.fibers[i].state == AT_WARP_BARRIER) waiting++;
      if (r.fibers[i].state == RUNNING) running++;
    }
    if (waiting == 0) continue;
    if (w * 32 + 32 > r.n) {
      fail("warp collective in a partial warp (block size not a multiple of 32)");
      return false;
    }
    if (waiting == 32) {
      for (int l = 0; l < 32; l++) r.fibers[w * 32 + l].state = RUNNING;
      released = true;
    } else if (running == 0) {
      bool exited = false;
      for (int l = 0; l < 32; l++) exited |= r.fibers[w * 32 + l].state == DONE;
      fail(exited ? "full-mask warp collective with an exited lane"
                  : "warp collective that some lanes reach at __syncthreads instead");
      return false;
    }
  }
  return released;
}

bool release_block(Runtime &r) {
  int live = 0, waiting = 0;
  for (int i = 0; i < r.n; i++) {
    if (r.fibers[i].state != DONE) live++;
    if (r.fibers[i].state == AT_BLOCK_BARRIER) waiting++;
  }
  if (live == 0 || waiting != live) return false;
  for (int i = 0; i < r.n; i++) {
    if (r.fibers[i].state == AT_BLOCK_BARRIER) r.fibers[i].state = RUNNING;
  }
  return true;
}

/* Runs one block to completion; false after an error. */
bool run_block(Runtime &r) {
  static std::vector<int> order;
  for (;;) {
    emu_schedule_order(r.n, order);
    for (int i : order) {
      EmuFiber &f = r.fibers[i];
      if (f.state != RUNNING) continue;
      emu_cur = &f;
      emu_thread_idx = f.tid;
      emu_switch(&r.scheduler_sp, f.sp);
      emu_cur = nullptr;
      if (!r.error.empty()) return false;
    }
    bool all_done = true;
    for (int i = 0; i < r.n; i++) all_done &= r.fibers[i].state == DONE;
    if (all_done) return true;
    release_warps(r);
    if (!r.error.empty()) return false;
    release_block(r);
    bool runnable = false;
    for (int i = 0; i < r.n; i++) runnable |= r.fibers[i].state == RUNNING;
    if (!runnable) {
      fail("deadlock: a barrier that not every live thread of the block reaches");
      return false;
    }
  }
}

std::map<std::string, EmuKernel> &registry() {
  static std::map<std::string, EmuKernel> kernels;
  return kernels;
}

}  // namespace

void emu_syncthreads() {
  emu_cur->state = AT_BLOCK_BARRIER;
  yield_to_scheduler();
}

void emu_syncwarp(unsigned mask) {
  if (mask != 0xffffffffu) {
    fail("only full-mask warp collectives are emulated");
    return;
  }
  emu_cur->state = AT_WARP_BARRIER;
  yield_to_scheduler();
}

/*
 * Every lane writes its value into this round's slot, waits for the warp, reads its
 * source lane's value. Rounds alternate between two slots: a lane can only be one round
 * ahead of the slowest, since each round ends at a barrier of all 32 lanes.
 */
uint64_t emu_warp_exchange(unsigned mask, uint64_t v, int lane_arg, bool xor_mode) {
  Runtime &r = runtime();
  EmuFiber *f = emu_cur;
  const int slot = (int)(f->round & 1);
  r.warps[f->warp].slot[slot][f->lane] = v;
  emu_syncwarp(mask);
  const int src = xor_mode ? (f->lane ^ lane_arg) & 31 : lane_arg & 31;
  const uint64_t out = r.warps[f->warp].slot[slot][src];
  f->round++;
  return out;
}

void emu_check_align(const void *p, int n, const char *file, int line) {
  if (((uintptr_t)p % (uintptr_t)n) == 0) return;
  char buf[256];
  std::snprintf(buf, sizeof buf, "misaligned %d-byte load at %p (%s:%d)", n, p, file, line);
  fail(buf);
}

float emu_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    float v = (float)man * 5.9604644775390625e-08f;
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t emu_f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
  if (ax < 0x38800000) {
    float a;
    std::memcpy(&a, &ax, 4);
    const float scaled = a * 16777216.0f;
    uint32_t m = (uint32_t)scaled;
    const float rem = scaled - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
    return (uint16_t)(sign | m);
  }
  const uint32_t mant = ax & 0x7fffff;
  uint32_t h = ((ax >> 23) - 112) << 10 | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

int emu_register_kernel(const char *name, EmuCall call, const size_t *sizes, int count) {
  EmuKernel k;
  k.name = name;
  k.call = call;
  k.sizes.assign(sizes, sizes + count);
  registry()[name] = k;
  return 0;
}

const EmuKernel *emu_find_kernel(const char *name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::string emu_launch(const EmuKernel &k, dim3 grid, dim3 block, void **params) {
  Runtime &r = runtime();
  r.error.clear();
  const long threads = (long)block.x * block.y * block.z;
  if (threads <= 0 || threads > MAX_THREADS) return "block of " + std::to_string(threads) + " threads";
  if (!emu_schedule_error().empty()) return emu_schedule_error();
  r.n = (int)threads;
  r.call = k.call;
  r.params = params;
  emu_grid_dim = grid;
  emu_block_dim = block;
  const long blocks = (long)grid.x * grid.y * grid.z;
  if (blocks > (long)INT32_MAX) return "grid of " + std::to_string(blocks) + " blocks";
  std::vector<int> order;
  emu_schedule_order((int)blocks, order);
  for (int b : order) {
    const unsigned x = (unsigned)(b % grid.x), y = (unsigned)(b / grid.x % grid.y),
                   z = (unsigned)(b / grid.x / grid.y);
    emu_block_idx = dim3{x, y, z};
    for (int i = 0; i < r.n; i++) init_fiber(r, i, block);
    if (!run_block(r)) {
      return k.name + " block (" + std::to_string(x) + "," + std::to_string(y) + "," +
             std::to_string(z) + "): " + r.error;
    }
  }
  return "";
}
