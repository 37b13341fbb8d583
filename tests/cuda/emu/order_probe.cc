/*
 * A test-only kernel of the emulator (no PTX of ours names it): every thread writes when it
 * first ran, counting across the grid, so a test can see the schedule NEURON_EMU_ORDER
 * chose for blocks and threads.
 */
#include "emu.h"

__global__ void emu_order_probe(int *seq, int *counter) {
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  seq[b * blockDim.x * blockDim.y * blockDim.z + t] = (*counter)++;
}
EMU_REGISTER(emu_order_probe);
