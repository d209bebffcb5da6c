// The NeuronCore's engines as a tile program drives them: the DMA engines (HBM
// <-> SBUF), the tensor engine (matmul and transpose into PSUM, f32
// accumulation), the vector and scalar engines (elementwise, activation,
// compare, select, reductions along the free dims, iota, memset; f32 math).
// One call runs one instruction of a validated program (validate.cpp checked
// every access for every loop iteration, so nothing here checks bounds).
//
// Threads: pure functions over the memories passed in; the caller holds the
// tenant's memory lock for the HBM arguments.
#pragma once

#include <chip/onchip_memory.h>
#include <neuron/tile.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace neuron::tile {

// Where an instruction runs: its core's on-chip memory, the host address of each
// HBM argument, and the open loops' induction variables (outermost first).
struct Env {
	chip::OnChipMemory &mem;
	std::span<std::byte *const> args;
	const int64_t *iv; // NEURON_TILE_MAX_LOOPS entries, zero past the open loops
};

// Runs one validated instruction (not a loop marker).
void execute(const neuron_tile_insn &in, const Env &env);

// base + sum step[l] * iv[l]
int64_t evaluate(const neuron_tile_affine &a, const int64_t *iv);

} // namespace neuron::tile
