// A range allocator over one device's HBM address space.
//
// Best fit over a size-ordered index of free blocks, splitting on allocation and
// coalescing with both neighbours on free, so fragmentation only lasts while the
// blocks that cause it live. Not thread-safe: the Device that owns it serialises
// calls under its memory mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace neuron::chip {

struct HbmStats {
	uint64_t total_bytes = 0;
	uint64_t used_bytes = 0;
	uint64_t free_bytes = 0;
	uint64_t largest_free_bytes = 0;
	uint64_t free_blocks = 0;
	uint64_t allocations = 0;
	// 1 - largest_free / free: 0 when all free space is one block.
	double fragmentation() const;
};

class HbmAllocator {
public:
	// Every allocation size is rounded up to `granule` and aligned to at least it.
	static constexpr uint64_t kGranule = 256;

	// Manages [base, base + size). size is rounded down to the granule.
	HbmAllocator(uint64_t base, uint64_t size);

	// Returns the address, or nullopt with *why set (zero size, alignment not a
	// power of two, or no free block large enough).
	std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment, std::string *why);
	// Marks [address, address + size) allocated again (size rounded up to the
	// granule), as an earlier neurond had allocated it (restart survival). False
	// with *why unless the range is granule-aligned and lies in one free block.
	bool reserve(uint64_t address, uint64_t size, std::string *why);
	// The free blocks (start -> size), e.g. to zero them after a restart.
	const std::map<uint64_t, uint64_t> &free_blocks() const { return free_by_address_; }
	// Frees the allocation that starts at address; false if there is none.
	bool release(uint64_t address);
	// Size of the allocation that starts at address, or 0.
	uint64_t allocation_size(uint64_t address) const;

	HbmStats stats() const;
	uint64_t base() const { return base_; }
	uint64_t size() const { return size_; }

private:
	void insert_free(uint64_t address, uint64_t size);
	void erase_free(std::map<uint64_t, uint64_t>::iterator it);

	uint64_t base_;
	uint64_t size_;
	uint64_t used_ = 0;
	std::map<uint64_t, uint64_t> free_by_address_;     // start -> size
	std::multimap<uint64_t, uint64_t> free_by_size_;    // size -> start
	std::map<uint64_t, uint64_t> allocated_;            // start -> size
};

} // namespace neuron::chip
