/* NEURON_EMU_ORDER: the order the emulator gives threads the CPU and runs blocks in. */
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "emu_schedule.h"

namespace {

/*
 * The order threads get the CPU and blocks run in, from NEURON_EMU_ORDER: `forward` (the
 * default), `reverse`, or `shuffle:SEED` (a new permutation every scheduling round and every
 * launch, drawn from SEED). A kernel whose result depends on it has a race that real
 * hardware, which promises no order, would show some day.
 */
struct Schedule {
  enum Mode { FORWARD, REVERSE, SHUFFLE } mode = FORWARD;
  uint64_t state = 0;
  std::string error;

  Schedule() {
    const char *env = std::getenv("NEURON_EMU_ORDER");
    const std::string v = env ? env : "";
    char *end = nullptr;
    if (v.empty() || v == "forward") {
      mode = FORWARD;
    } else if (v == "reverse") {
      mode = REVERSE;
    } else if (v.rfind("shuffle:", 0) == 0 && v.size() > 8 &&
               (state = std::strtoull(v.c_str() + 8, &end, 10), *end == 0)) {
      mode = SHUFFLE;
    } else {
      error = "NEURON_EMU_ORDER=" + v + " is not forward, reverse or shuffle:SEED";
    }
  }

  /* splitmix64: a fixed sequence per seed, the same on every machine. */
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  /* 0..n-1 in this schedule's order. */
  void order(int n, std::vector<int> &out) {
    out.resize((size_t)n);
    for (int i = 0; i < n; i++) out[(size_t)i] = mode == REVERSE ? n - 1 - i : i;
    if (mode != SHUFFLE) return;
    for (int i = n - 1; i > 0; i--) std::swap(out[(size_t)i], out[(size_t)(next() % (uint64_t)(i + 1))]);
  }
};

Schedule &schedule() {
  static Schedule s;
  return s;
}

}  // namespace

void emu_schedule_order(int n, std::vector<int> &out) { schedule().order(n, out); }

const std::string &emu_schedule_error() { return schedule().error; }

int emu_order_mode() { return schedule().error.empty() ? (int)schedule().mode : -1; }
