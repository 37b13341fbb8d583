/*
 * State shared by the parts of the stand-in libcuda + libcublas (fake_driver.cc,
 * fake_memory.cc, fake_cublas.cc): configuration, counters, allocations, streams, and
 * the checks every entry point makes.
 */
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "emu_limits.h"
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
  E_NOT_READY = 600,
  E_ILLEGAL_ADDRESS = 700,
  E_LAUNCH_OUT_OF_RESOURCES = 701,
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
  /* The register file one block may use (an H100/H200's). */
  int regs_per_block = 65536;
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

/* Work queued on a stream: it runs at a synchronisation point, not when it is issued. */
struct Op {
  uint64_t seq;
  std::function<CUresult()> run;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  /* Created without CU_STREAM_NON_BLOCKING: the legacy stream waits for it. */
  bool blocking = true;
  std::vector<Node> nodes;
  std::deque<Op> queue;
  uint64_t issued = 0;
  uint64_t done = 0;
};

struct Graph {
  /* Shared with launches still queued when the exec is destroyed. */
  std::shared_ptr<const std::vector<Node>> nodes;
};

struct Module {
  std::set<std::string> entries;
  /* The architecture the image was built for (`.target sm_N`, a cubin's e_flags); 0 unknown. */
  int arch = 0;
};

/* Dynamic shared memory a launch may ask for without cuFuncSetAttribute. */
const int DEFAULT_DYNAMIC_SHARED = 48 * 1024;

struct Function {
  const EmuKernel *kernel;
  /* Null for a kernel the limits table does not know (the emulator's own probes). */
  const EmuLimits *limits;
  int max_dynamic_shared = DEFAULT_DYNAMIC_SHARED;
};

/* The table's entry for kernel `name` built for `arch`, or null. */
const EmuLimits *limits_of(int arch, const char *name);
/* The most shared memory one block may have with the opt-in (sm_90/sm_100: 227 KiB). */
int shared_optin_limit();
/* Why a launch of `f` with these dimensions and dynamic shared memory cannot run, or OK. */
CUresult launch_limits(const Function &f, unsigned threads, unsigned shmem);

struct Event {
  double ms = 0;
  bool recorded = false;
  /* Where its last record sits: complete once that stream's `done` reaches `seq`. */
  Stream *stream = nullptr;
  uint64_t seq = 0;
  uint64_t generation = 0;
  bool complete = true;
};

extern Config cfg;
extern Stats stats;
extern bool initialised;
extern void *current_ctx;
extern int ctx_refs;
extern std::map<uintptr_t, Alloc> allocs;
extern std::set<Stream *> streams;
/* The legacy (NULL) stream's queue. */
extern Stream legacy;
/* The first launch failure: like the real driver's, later calls keep failing. */
extern std::string sticky;
extern CUresult sticky_code;
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
/* The queue work on handle `s` goes to (the legacy stream's for NULL). */
Stream *queue_of(void *s);
CUresult run_node(const Node &n);
/* Queues `run` on `s`; its sequence number. */
uint64_t enqueue(Stream *s, std::function<CUresult()> run);
/* Queues `run` on stream handle `s` (the legacy stream first waits for blocking ones). */
CUresult issue(void *s, std::function<CUresult()> run);
/* Records a failure of queued work: reported by every later synchronisation. */
CUresult fail_sticky(const std::string &why, CUresult code);
/* Runs `s`'s queued work up to and including `seq` (all of it by default). */
CUresult drain(Stream *s, uint64_t seq = UINT64_MAX);
/* Runs the work queued on every stream. */
CUresult drain_all();
/* The result a synchronisation reports: the first failure of queued work, else OK. */
CUresult sync_result();
/* A copy on `stream` (async) or the legacy stream: refused on a capturing stream. */
CUresult copy_checks(void *stream, bool async);
void entries_of_ptx(const char *ptx, std::set<std::string> &out);
void entries_of_elf(const unsigned char *img, std::set<std::string> &out);

}  // namespace fake
