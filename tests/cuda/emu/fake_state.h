/*
 * State shared by the parts of the stand-in libcuda + libcublas (fake_driver.cc,
 * fake_memory.cc, fake_cublas.cc): configuration, counters, allocations, streams, and
 * the checks every entry point makes.
 */
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "emu_runtime.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  OK = 0,
  E_INVALID_VALUE = 1,
  E_OUT_OF_MEMORY = 2,
  E_NOT_INITIALIZED = 3,
  E_NO_DEVICE = 100,
  E_INVALID_DEVICE = 101,
  E_INVALID_IMAGE = 200,
  E_INVALID_CONTEXT = 201,
  E_INVALID_HANDLE = 400,
  E_NOT_FOUND = 500,
  E_ILLEGAL_ADDRESS = 700,
  E_MISALIGNED_ADDRESS = 716,
  E_LAUNCH_FAILED = 719,
  E_CAPTURE_UNSUPPORTED = 900,
  E_CAPTURE_INVALIDATED = 901,
  E_CAPTURE_UNMATCHED = 903,
};

namespace fake {
struct Config {
  int init_result = 0;
  int device_count = 1;
  int cc_major = 9;
  int cc_minor = 0;
  double total_mb = 16384;
  int sm_count = 132;
};

struct Stats {
  double launches = 0, graph_launches = 0, captures = 0, graph_nodes = 0, allocations = 0;
  double live_bytes = 0, gemms = 0;
};

struct Alloc {
  void *map;
  size_t map_len;
  size_t size;
  size_t padded;
};

struct Node {
  const EmuKernel *kernel;
  dim3 grid, block;
  std::vector<std::vector<char>> params;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  std::vector<Node> nodes;
};

struct Graph {
  std::vector<Node> nodes;
};

struct Module {
  std::set<std::string> entries;
};

struct Function {
  const EmuKernel *kernel;
};

struct Event {
  double ms = 0;
  bool recorded = false;
};

extern Config cfg;
extern Stats stats;
extern bool initialised;
extern void *current_ctx;
extern int ctx_refs;
extern std::map<uintptr_t, Alloc> allocs;
extern std::set<Stream *> streams;
/* The first launch failure: like the real driver's, later calls keep failing. */
extern std::string sticky;
extern char primary_ctx_token;

const size_t PAGE = 4096;
const unsigned char CANARY = 0xA5;

double now_ms();
bool capturing_anywhere();
/* Calls that a thread-local capture forbids on the capturing thread. */
CUresult unsafe_during_capture();
/* cuInit ran and a context is current. */
CUresult ready();
/* The allocation holding [p, p + n), or null. */
const Alloc *find(CUdeviceptr p, size_t n);
bool canary_ok(uintptr_t base, const Alloc &a);
CUresult check_canaries();
Stream *stream_of(void *s);
CUresult run_node(const Node &n);
/* A copy on `stream` (async) or the legacy stream: refused on a capturing stream. */
CUresult copy_checks(void *stream, bool async);
void entries_of_ptx(const char *ptx, std::set<std::string> &out);
void entries_of_elf(const unsigned char *img, std::set<std::string> &out);

}  // namespace fake
