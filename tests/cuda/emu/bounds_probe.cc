/*
 * A test-only kernel of the emulator (no PTX of ours names it): it indexes a shared and a
 * local array at `index`, so a test can show the UBSan variant (NEURON_EMU_SANITIZE=ubsan)
 * stops a kernel that steps outside either.
 */
#include "emu.h"

__global__ void emu_bounds_probe(int *out, int index) {
  __shared__ int tile[32];
  int local[8];
  for (int i = 0; i < 8; i++) local[i] = i * (int)threadIdx.x;
  tile[threadIdx.x % 32] = (int)threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = tile[index] + local[index % 16];
}
EMU_REGISTER(emu_bounds_probe);
