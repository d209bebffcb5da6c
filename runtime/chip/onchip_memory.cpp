#include "onchip_memory.h"

#include <algorithm>
#include <stdexcept>

namespace neuron::chip {

OnChipMemory::OnChipMemory(const OnChip &sizes, uint64_t sbuf_bytes, uint64_t psum_bytes)
	: sizes_(sizes), sbuf_stride_(sbuf_bytes), psum_stride_(psum_bytes)
{
	if (sbuf_bytes > sizes.sbuf_partition_bytes || psum_bytes > sizes.psum_partition_bytes)
		throw std::invalid_argument("on-chip memory larger than the profile's");
	sbuf_.assign(sizes.partitions * sbuf_stride_, std::byte{0xff});
	psum_.assign(sizes.partitions * psum_stride_, std::byte{0xff});
}

} // namespace neuron::chip
