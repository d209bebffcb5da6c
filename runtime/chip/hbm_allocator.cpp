#include "hbm_allocator.h"

#include <bit>

namespace neuron::chip {

double HbmStats::fragmentation() const
{
	if (free_bytes == 0)
		return 0.0;
	return 1.0 - static_cast<double>(largest_free_bytes) / static_cast<double>(free_bytes);
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

HbmAllocator::HbmAllocator(uint64_t base, uint64_t size)
	: base_(base), size_(size & ~(kGranule - 1))
{
	if (size_ > 0)
		insert_free(base_, size_);
}

void HbmAllocator::insert_free(uint64_t address, uint64_t size)
{
	free_by_address_.emplace(address, size);
	free_by_size_.emplace(size, address);
}

void HbmAllocator::erase_free(std::map<uint64_t, uint64_t>::iterator it)
{
	auto [lo, hi] = free_by_size_.equal_range(it->second);
	for (auto s = lo; s != hi; ++s) {
		if (s->second == it->first) {
			free_by_size_.erase(s);
			break;
		}
	}
	free_by_address_.erase(it);
}

std::optional<uint64_t> HbmAllocator::allocate(uint64_t size, uint64_t alignment, std::string *why)
{
	if (size == 0) {
		*why = "allocation size is zero";
		return std::nullopt;
	}
	if (alignment == 0)
		alignment = kGranule;
	if (!std::has_single_bit(alignment)) {
		*why = "alignment " + std::to_string(alignment) + " is not a power of two";
		return std::nullopt;
	}
	if (size > size_ || alignment > size_) {
		*why = "requested " + std::to_string(size) + " bytes but the device has " +
		       std::to_string(size_) + " bytes of HBM";
		return std::nullopt;
	}
	alignment = std::max(alignment, kGranule);
	const uint64_t rounded = round_up(size, kGranule);

	// Best fit: the smallest block that holds the request after alignment. The
	// size index is searched from the first block large enough; alignment padding
	// can disqualify a block, so keep looking past it.
	for (auto it = free_by_size_.lower_bound(rounded); it != free_by_size_.end(); ++it) {
		const uint64_t start = it->second, block = it->first;
		const uint64_t aligned = round_up(start, alignment);
		if (aligned - start + rounded > block)
			continue;
		erase_free(free_by_address_.find(start));
		if (aligned > start)
			insert_free(start, aligned - start);
		const uint64_t end = aligned + rounded, block_end = start + block;
		if (block_end > end)
			insert_free(end, block_end - end);
		allocated_.emplace(aligned, rounded);
		used_ += rounded;
		return aligned;
	}
	const HbmStats s = stats();
	*why = "out of device memory: requested " + std::to_string(size) + " bytes, " +
	       std::to_string(s.free_bytes) + " free, largest free block " +
	       std::to_string(s.largest_free_bytes) + " bytes";
	return std::nullopt;
}

bool HbmAllocator::reserve(uint64_t address, uint64_t size, std::string *why)
{
	const uint64_t rounded = round_up(size, kGranule);
	if (size == 0 || address % kGranule != 0 || address < base_ || address - base_ + rounded > size_) {
		*why = "range " + std::to_string(address) + "+" + std::to_string(size) + " is not a granule-aligned range of this device";
		return false;
	}
	auto it = free_by_address_.upper_bound(address);
	if (it == free_by_address_.begin() || std::prev(it)->first + std::prev(it)->second < address + rounded) {
		*why = "range " + std::to_string(address) + "+" + std::to_string(size) + " is not free (it overlaps another allocation)";
		return false;
	}
	--it;
	const uint64_t start = it->first, block_end = it->first + it->second, end = address + rounded;
	erase_free(it);
	if (address > start)
		insert_free(start, address - start);
	if (block_end > end)
		insert_free(end, block_end - end);
	allocated_.emplace(address, rounded);
	used_ += rounded;
	return true;
}

bool HbmAllocator::release(uint64_t address)
{
	auto a = allocated_.find(address);
	if (a == allocated_.end())
		return false;
	uint64_t start = a->first, size = a->second;
	allocated_.erase(a);
	used_ -= size;

	// Coalesce with the free neighbour after, then the one before.
	auto next = free_by_address_.lower_bound(start);
	if (next != free_by_address_.end() && next->first == start + size) {
		size += next->second;
		erase_free(next);
	}
	auto after = free_by_address_.lower_bound(start);
	if (after != free_by_address_.begin()) {
		auto prev = std::prev(after);
		if (prev->first + prev->second == start) {
			start = prev->first;
			size += prev->second;
			erase_free(prev);
		}
	}
	insert_free(start, size);
	return true;
}

uint64_t HbmAllocator::allocation_size(uint64_t address) const
{
	auto a = allocated_.find(address);
	return a == allocated_.end() ? 0 : a->second;
}

HbmStats HbmAllocator::stats() const
{
	HbmStats s;
	s.total_bytes = size_;
	s.used_bytes = used_;
	s.free_bytes = size_ - used_;
	s.largest_free_bytes = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
	s.free_blocks = free_by_address_.size();
	s.allocations = allocated_.size();
	return s;
}

} // namespace neuron::chip
