/* The emulator's kernel registry and launcher, as the fake driver sees them. */
#pragma once
#include <string>
#include <vector>

#include "emu.h"

struct EmuKernel {
  std::string name;
  EmuCall call;
  /* Size in bytes of each parameter, in order. */
  std::vector<size_t> sizes;
};

const EmuKernel *emu_find_kernel(const char *name);

/* Runs a whole grid; an empty string on success, else what went wrong. */
std::string emu_launch(const EmuKernel &k, dim3 grid, dim3 block, void **params);
