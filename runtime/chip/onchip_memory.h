// A NeuronCore's on-chip memories as one kernel execution sees them: SBUF and
// PSUM, each `partitions` rows of bytes (profile.h, OnChip). Only the bytes a
// validated tile program can touch are backed (its high-water mark per
// partition), so a kernel that uses 64 KiB of SBUF does not cost 24 MiB.
//
// Fresh memory reads as NaN (every byte 0xff: NaN in f32, bf16 and f16; -1 in
// i32), so a kernel that reads a tile before writing it sees poison, never an
// earlier kernel's or tenant's data (NKI's simulator does the same).
//
// Ownership: one per kernel execution (tile/execution.h), touched by the one
// thread running it; no locks (but the pool of backing stores has one). The simulated core keeps it across preemptions,
// as real hardware would save and restore the core's state.
#pragma once

#include "profile.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace neuron::chip {

class OnChipMemory {
public:
	// Backs sbuf_bytes / psum_bytes per partition (each at most the profile's).
	OnChipMemory(const OnChip &sizes, uint64_t sbuf_bytes, uint64_t psum_bytes);
	// A copy (a lane's memory at a fork). Both take their bytes from a pool of the
	// stores of ended memories (onchip_memory.cpp), where the destructor leaves them.
	OnChipMemory(const OnChipMemory &o);
	OnChipMemory &operator=(const OnChipMemory &) = delete;
	~OnChipMemory();

	const OnChip &sizes() const { return sizes_; }
	// Byte `offset` of `partition` (no bounds check: tile programs are validated).
	std::byte *sbuf(uint32_t partition, uint64_t offset) { return sbuf_.data() + partition * sbuf_stride_ + offset; }
	std::byte *psum(uint32_t partition, uint64_t offset) { return psum_.data() + partition * psum_stride_ + offset; }
	// Bytes from one partition to the next in sbuf() / psum().
	uint64_t sbuf_stride() const { return sbuf_stride_; }
	uint64_t psum_stride() const { return psum_stride_; }
	uint64_t backed_bytes() const { return sbuf_.size() + psum_.size(); }

private:
	OnChip sizes_;
	uint64_t sbuf_stride_, psum_stride_;
	std::vector<std::byte> sbuf_, psum_;
};

} // namespace neuron::chip
