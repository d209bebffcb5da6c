#include "emu_collective_mover.h"

#include <cstring>

namespace neuron::emu {

std::string EmuCollectiveMover::bind(const backend::MemberRegion &r, int *id)
{
	uint64_t start = 0;
	const backend::DeviceAllocation *a = r.ctx->memory().find_device(r.device, r.address, r.bytes, &start);
	if (!a || !a->host)
		return "[" + std::to_string(r.address) + ", +" + std::to_string(r.bytes) + ") on device " +
		       std::to_string(r.device) + " is not inside one allocation of this tenant";
	*id = static_cast<int>(regions_.size());
	regions_.push_back(a->host + (r.address - start));
	return {};
}

void EmuCollectiveMover::copy(int dst, uint64_t dst_offset, int src, uint64_t src_offset, uint64_t bytes)
{
	std::memmove(regions_.at(dst) + dst_offset, regions_.at(src) + src_offset, bytes);
}

void EmuCollectiveMover::reduce(int dst, uint64_t dst_offset, std::span<const int> srcs, uint64_t src_offset,
				uint64_t count, uint8_t dtype, kernels::CollectiveReduce op)
{
	std::byte *out = regions_.at(dst) + dst_offset;
	const uint64_t bytes = count * kernels::collective_element_bytes(dtype);
	// The kernel folds source after source into dst: dst may be the first source
	// but no later one (an in-place reduce_scatter's output is the rank's own
	// block of its input); then it reduces into a buffer of its own first.
	bool aliased = false;
	sources_.clear();
	for (int s : srcs) {
		const std::byte *in = regions_.at(s) + src_offset;
		aliased = aliased || (!(sources_.empty() && in == out) && in < out + bytes && out < in + bytes);
		sources_.push_back(in);
	}
	std::byte *target = out;
	if (aliased) {
		bounce_.resize(bytes);
		target = bounce_.data();
	}
	kernels::collective_reduce(target, sources_.data(), static_cast<int>(sources_.size()), count, dtype, op);
	if (aliased)
		std::memcpy(out, target, bytes);
}

} // namespace neuron::emu
