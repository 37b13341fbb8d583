/*
 * The fake driver's shared state and checks, and the emulator controls tests use:
 * emu_configure (device shape, failures to inject) and emu_stat (what happened).
 */
#include <time.h>

#include <cstdio>
#include <cstring>

#include "emu_schedule.h"
#include "fake_state.h"

namespace fake {

Config cfg;
Stats stats;
bool initialised = false;
void *current_ctx = nullptr;
int ctx_refs = 0;
std::map<uintptr_t, Alloc> allocs;
std::set<Stream *> streams;
std::string sticky;
CUresult sticky_code = OK;
char primary_ctx_token;

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool capturing_anywhere() {
  for (Stream *s : streams)
    if (s->capturing) return true;
  return false;
}

/* Calls that a thread-local capture forbids on the capturing thread. */
CUresult unsafe_during_capture() {
  if (!capturing_anywhere()) return OK;
  for (Stream *s : streams)
    if (s->capturing) s->invalidated = true;
  return E_CAPTURE_UNSUPPORTED;
}

CUresult ready() {
  if (!initialised) return E_NOT_INITIALIZED;
  if (current_ctx == nullptr) return E_INVALID_CONTEXT;
  return OK;
}

/* The allocation holding [p, p + n), or null. */
const Alloc *find(CUdeviceptr p, size_t n) {
  auto it = allocs.upper_bound((uintptr_t)p);
  if (it == allocs.begin()) return nullptr;
  --it;
  const uintptr_t base = it->first;
  if ((uintptr_t)p < base || (uintptr_t)p + n > base + it->second.size) return nullptr;
  return &it->second;
}

bool canary_ok(uintptr_t base, const Alloc &a) {
  const unsigned char *p = (const unsigned char *)base;
  for (size_t i = a.size; i < a.padded; i++)
    if (p[i] != CANARY) return false;
  return true;
}

CUresult check_canaries() {
  for (auto &kv : allocs) {
    if (!canary_ok(kv.first, kv.second)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "write past the end of the %zu-byte buffer at 0x%lx",
                    kv.second.size, (unsigned long)kv.first);
      return fail_sticky(buf, E_ILLEGAL_ADDRESS);
    }
  }
  return OK;
}

Stream *stream_of(void *s) {
  if (s == nullptr) return nullptr;
  Stream *st = (Stream *)s;
  return streams.count(st) ? st : nullptr;
}

CUresult run_node(const Node &n) {
  std::vector<void *> ptrs;
  for (const auto &p : n.params) ptrs.push_back((void *)p.data());
  const std::string err = emu_launch(*n.kernel, n.grid, n.block, ptrs.data());
  stats.launches++;
  if (err.empty()) return OK;
  return fail_sticky(err, err.find("misaligned") != std::string::npos ? E_MISALIGNED_ADDRESS
                                                                       : E_LAUNCH_FAILED);
}

CUresult fail_sticky(const std::string &why, CUresult code) {
  if (sticky.empty()) {
    sticky = why;
    sticky_code = code;
    std::fprintf(stderr, "fake libcuda: %s\n", why.c_str());
  }
  return code;
}

void entries_of_ptx(const char *ptx, std::set<std::string> &out) {
  const char *p = ptx;
  while ((p = std::strstr(p, ".entry ")) != nullptr) {
    p += 7;
    const char *e = p;
    while (*e && *e != '(' && *e != ' ' && *e != '\n') e++;
    out.insert(std::string(p, e - p));
    p = e;
  }
}

/* Names in a cubin's string tables: every NUL-terminated run of identifier characters. */
void entries_of_elf(const unsigned char *img, std::set<std::string> &out) {
  uint64_t shoff;
  uint16_t shentsize, shnum;
  std::memcpy(&shoff, img + 0x28, 8);
  std::memcpy(&shentsize, img + 0x3A, 2);
  std::memcpy(&shnum, img + 0x3C, 2);
  const size_t len = shoff + (size_t)shentsize * shnum;
  size_t start = 0;
  for (size_t i = 0; i < len; i++) {
    const unsigned char c = img[i];
    const bool ident = c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                       (c >= 'A' && c <= 'Z');
    if (!ident) {
      if (c == 0 && i > start) out.insert(std::string((const char *)img + start, i - start));
      start = i + 1;
    }
  }
}

CUresult copy_checks(void *stream, bool async) {
  if (CUresult r = ready()) return r;
  Stream *s = stream_of(stream);
  if (stream != nullptr && s == nullptr) return E_INVALID_HANDLE;
  if ((s && s->capturing) || (!async && capturing_anywhere())) {
    if (s) s->invalidated = true;
    return E_CAPTURE_UNSUPPORTED;
  }
  return OK;
}

}  // namespace fake

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

/* ---- emulator controls ---- */

int emu_configure(const char *key, double value) {
  const std::string k = key;
  if (k == "init_result") cfg.init_result = (int)value;
  else if (k == "device_count") cfg.device_count = (int)value;
  else if (k == "cc_major") cfg.cc_major = (int)value;
  else if (k == "cc_minor") cfg.cc_minor = (int)value;
  else if (k == "total_mb") cfg.total_mb = value;
  else if (k == "sm_count") cfg.sm_count = (int)value;
  else if (k == "regs_per_block") cfg.regs_per_block = (int)value;
  else if (k == "reset_stats") stats = Stats{};
  else return -1;
  return 0;
}

/* Runs every queued operation, as if the device caught up: for test doubles of stream-ordered
 * work done on the host (a fake collective). */
int emu_drain() { return drain_all(); }

double emu_stat(const char *key) {
  const std::string k = key;
  if (k == "launches") return stats.launches;
  if (k == "graph_launches") return stats.graph_launches;
  if (k == "captures") return stats.captures;
  if (k == "graph_nodes") return stats.graph_nodes;
  if (k == "allocations") return (double)allocs.size();
  if (k == "live_bytes") return stats.live_bytes;
  if (k == "gemms") return stats.gemms;
  if (k == "sticky_error") return sticky.empty() ? 0 : 1;
  if (k == "order") return emu_order_mode();
  return -1;
}

}  // extern "C"
#pragma GCC visibility pop
