// f32 partial results of the chains of a tiled command whose output dtype would
// round them (bf16/f16): a matmul's K tiles, a sum or mean cut along a reduced dim.
//
// Such a chain's tiles compute into an f32 buffer of the chain's output block
// instead of the output (the first tile of a matmul with beta != 0 starts from the
// old output, converted), and its last tile stores the buffer, rounded once, into
// the output: the result is the whole op's (PyTorch's CPU path accumulates bf16 and
// f16 products and sums in f32 too). Without this these ops could only run whole.
//
// Owner: LogicalCore::InFlight. A chain runs on one thread at a time
// (tile_cursor.h), and a parked chain keeps its buffer for whoever resumes it; the
// mutex guards only the map (insertions and erasures by different chains).
#pragma once

#include "operands.h"
#include "tiling.h"

#include <fault.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace neuron::chip {

class ChainPartials {
public:
	// Chain `chain`'s buffer of `floats` floats, made on first use. Throws std::bad_alloc.
	float *get(uint64_t chain, size_t floats);
	void release(uint64_t chain);
	// Only between commands.
	void clear();

private:
	std::mutex mutex_;
	std::unordered_map<uint64_t, std::vector<float>> buffers_; // node-based: data() is stable
};

// Runs tile `index` of a plan with f32 partials (has_f32_partials): `tile` and
// `views` are the narrowed command and its operands. Returns a fault, if any.
std::optional<kernels::Fault> execute_with_partials(ChainPartials &partials, const TilePlan &plan, uint64_t index,
						    const neuron_cmd &tile, const OperandViews &views, int threads,
						    kernels::GemmPacks *packs);

} // namespace neuron::chip
