// Partial results that a chain of tiles carries from one tile to the next:
//
// - f32 partial results of a command whose output dtype would round them
//   (bf16/f16): a matmul's K tiles, a sum or mean cut along a reduced dim. Such a
//   chain's tiles compute into an f32 buffer of the chain's output block instead of
//   the output (the first tile of a matmul with beta != 0 starts from the old
//   output, converted), and its last tile stores the buffer, rounded once, into the
//   output: the result is the whole op's (PyTorch's CPU path accumulates bf16 and
//   f16 products and sums in f32 too).
// - the row statistics of a softmax/log-softmax whose rows are longer than a tile
//   (kernels::RowStats): the chain's first pass over the chunks gathers them, the
//   second writes the results;
// - the best element so far of each row of such an arg-reduce (kernels::ArgBest),
//   whose indexes the chain's last tile stores.
//
// Without these, such ops could only run whole.
//
// Where the state lives: in host memory the ChainPartials allocates per chain (the
// emu backend, whose tiles run in this process), or in a region of device memory
// the daemon allocated for the command, one fixed slot per chain (the kmd backend:
// its tiles are separate driver jobs, so the state must outlive each of them
// where the engine can reach it; chain_state_bytes() sizes the slots).
//
// Owner: the runner state of the logical core's in-flight command (emu), or a kmd
// engine job (kmd). A chain runs on one thread at a time (tile_cursor.h), and a
// parked chain keeps its buffer for whoever resumes it; the mutex guards only the
// map (insertions and erasures by different chains).
#pragma once

#include "tiling.h"

#include <fault.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace neuron::sched {

class ChainPartials {
public:
	ChainPartials() = default;
	// State in a region: chain c's slot is [base + c * slot_bytes, + slot_bytes).
	ChainPartials(std::byte *base, uint64_t slot_bytes, uint64_t chains)
		: base_(base), slot_bytes_(slot_bytes), chains_(chains)
	{
	}

	// Chain `chain`'s buffer of at least `bytes` bytes, aligned for any type (host:
	// made on first use). Throws std::bad_alloc (host memory exhausted, or a region
	// slot too small for what the chain asks: the daemon sized it wrongly).
	void *get(uint64_t chain, size_t bytes);
	void release(uint64_t chain);
	// Only between commands.
	void clear();

private:
	std::byte *base_ = nullptr;
	uint64_t slot_bytes_ = 0, chains_ = 0;
	std::mutex mutex_;
	std::unordered_map<uint64_t, std::vector<std::max_align_t>> buffers_; // node-based: data() is stable
};

// Bytes of chain state one chain of `plan` needs at most (0 if its chains carry
// no state): what a device-memory region reserves per chain. Rounded up to 64.
uint64_t chain_state_bytes(const neuron_cmd &cmd, const TilePlan &plan);

// Runs tile `index` of `plan`: `tile` and `views` are the narrowed command and its
// operands. A tile of a chain that carries partial results (Carry::F32Partials,
// RowStats, ArgBest) keeps them in `partials`; any other runs as kernels::execute.
// Returns a fault, if any.
std::optional<kernels::Fault> execute_tile(ChainPartials &partials, const TilePlan &plan, uint64_t index,
					   const neuron_cmd &tile, const OperandViews &views, int threads,
					   kernels::GemmPacks *packs);

} // namespace neuron::sched
