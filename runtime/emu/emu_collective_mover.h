// Collective groups' data movement on the emu backend (backend/collective_mover.h):
// every tenant's HBM lies in this process, so a member's region is a host address
// and a copy or reduction runs right here, on the calling thread.
#pragma once

#include <backend/collective_mover.h>

#include <vector>

namespace neuron::emu {

class EmuCollectiveMover final : public backend::CollectiveMover {
public:
	std::string bind(const backend::MemberRegion &r, int *id) override;
	// A step's sources and destination stay in the CPU's cache.
	uint64_t chunk_bytes() const override { return 256 * 1024; }
	void copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes) override;
	void reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset, uint64_t count,
		    uint8_t dtype, kernels::CollectiveReduce op) override;
	std::string finish() override { return {}; }

private:
	std::vector<std::byte *> regions_;
	std::vector<const std::byte *> sources_; // reduce()'s, reused
	std::vector<std::byte> bounce_;          // a reduction onto a later source goes through it
};

} // namespace neuron::emu
