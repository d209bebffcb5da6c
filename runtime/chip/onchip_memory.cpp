#include "onchip_memory.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace neuron::chip {

namespace {

// Backing stores of ended executions, kept for the next ones. A kernel call
// creates an execution (and a copy per lane when it forks); a fresh store of a
// few hundred KiB is mmap'd, page-faulted and zeroed by the kernel, then filled,
// and unmapped again at the end: ~10% of a 512^3 matmul kernel's engine time in
// page faults (perf). A kept store is only filled (0xff, or the copied bytes), so
// no earlier kernel's bytes are ever visible. Bounded: stores past kKeepBytes in
// all are freed.
class Pool {
public:
	// A kept store of exactly `bytes` (a kernel called again, a lane's copy), else an
	// empty vector. Exactly: a store is then no larger than a fresh one, so an access
	// past it is still a sanitizer's heap overflow (tests/fuzz/fuzz_tile.cpp).
	std::vector<std::byte> take(size_t bytes)
	{
		std::lock_guard lock(mutex_);
		auto best = std::find_if(free_.begin(), free_.end(),
					 [bytes](const std::vector<std::byte> &v) { return v.capacity() == bytes; });
		if (best == free_.end())
			return {};
		std::vector<std::byte> v = std::move(*best);
		kept_ -= v.capacity();
		free_.erase(best);
		return v;
	}
	void give(std::vector<std::byte> &&v)
	{
		if (v.capacity() == 0)
			return;
		std::lock_guard lock(mutex_);
		while (!free_.empty() && kept_ + v.capacity() > kKeepBytes) {
			kept_ -= free_.front().capacity(); // the oldest goes
			free_.erase(free_.begin());
		}
		if (kept_ + v.capacity() > kKeepBytes)
			return;
		kept_ += v.capacity();
		free_.push_back(std::move(v));
	}

private:
	static constexpr size_t kKeepBytes = size_t{64} << 20;
	std::mutex mutex_;
	std::vector<std::vector<std::byte>> free_;
	size_t kept_ = 0;
};

Pool &pool()
{
	static Pool *p = new Pool; // never destroyed: executions may end during exit
	return *p;
}

std::vector<std::byte> filled(size_t bytes)
{
	std::vector<std::byte> v = pool().take(bytes);
	if (v.capacity() != bytes)
		v.reserve(bytes); // exactly: a kept store is then taken by capacity
	v.assign(bytes, std::byte{0xff});
	return v;
}

std::vector<std::byte> copied(const std::vector<std::byte> &from)
{
	std::vector<std::byte> v = pool().take(from.size());
	if (v.capacity() != from.size())
		v.reserve(from.size());
	v.assign(from.begin(), from.end());
	return v;
}

} // namespace

OnChipMemory::OnChipMemory(const OnChip &sizes, uint64_t sbuf_bytes, uint64_t psum_bytes)
	: sizes_(sizes), sbuf_stride_(sbuf_bytes), psum_stride_(psum_bytes)
{
	if (sbuf_bytes > sizes.sbuf_partition_bytes || psum_bytes > sizes.psum_partition_bytes)
		throw std::invalid_argument("on-chip memory larger than the profile's");
	sbuf_ = filled(sizes.partitions * sbuf_stride_);
	psum_ = filled(sizes.partitions * psum_stride_);
}

OnChipMemory::OnChipMemory(const OnChipMemory &o)
	: sizes_(o.sizes_), sbuf_stride_(o.sbuf_stride_), psum_stride_(o.psum_stride_), sbuf_(copied(o.sbuf_)),
	  psum_(copied(o.psum_))
{
}

OnChipMemory::~OnChipMemory()
{
	pool().give(std::move(sbuf_));
	pool().give(std::move(psum_));
}

} // namespace neuron::chip
