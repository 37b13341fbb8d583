/* The order threads and blocks run in (NEURON_EMU_ORDER; emu_schedule.cc). */
#pragma once
#include <string>
#include <vector>

/* 0..n-1 in the order they are to run: a new permutation each call under shuffle. */
void emu_schedule_order(int n, std::vector<int> &out);
/* Why NEURON_EMU_ORDER cannot be used, or empty. */
const std::string &emu_schedule_error();
/* NEURON_EMU_ORDER as read: 0 forward, 1 reverse, 2 shuffle, -1 invalid. */
int emu_order_mode();
