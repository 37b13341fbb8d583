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

/* NEURON_EMU_ORDER as the runtime read it: 0 forward, 1 reverse, 2 shuffle, -1 invalid. */
int emu_order_mode();
