// The device allocator's bookkeeping (device_allocator.cpp): segments (one
// neuron_alloc each) cut into blocks. Small requests (<= 1 MiB, power-of-two size
// classes) get a segment per block and are reused by exact size. Large requests
// (multiples of 2 MiB) take the best-fitting free block of their device and
// stream and split it, keeping the rest free; a freed block merges with free
// neighbours of its segment, so memory freed by one size mix serves the next
// (tests/torch/test_memory.py). Not thread-safe: the allocator's mutex owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace torch_neuron {

struct PoolBlock {
	int device = 0;
	int64_t stream = 0;
	uint64_t segment = 0; // base address of the segment holding the block
	size_t size = 0;
	size_t requested = 0; // bytes asked for (allocated blocks)
	bool allocated = false;
	std::vector<int64_t> other_streams; // streams it was used on besides its own
};

struct PoolSegment {
	int device;
	int64_t stream;
	uint64_t addr;
	size_t size;
};

class BlockPool {
public:
	static constexpr size_t kSmallLimit = size_t{1} << 20;
	static constexpr size_t kLargeStep = size_t{2} << 20;

	static size_t round_size(size_t n);
	static bool is_small(size_t size) { return size <= kSmallLimit; }

	// A cached block of exactly `size` bytes for (device, stream), cut from the
	// best-fitting free block; its address, or nullopt.
	std::optional<uint64_t> take(int device, int64_t stream, size_t size, size_t requested);
	// A new segment holding one allocated block.
	void add_segment(int device, int64_t stream, uint64_t addr, size_t size, size_t requested);
	// The allocated block at addr, or nullptr.
	PoolBlock *find(uint64_t addr);
	// Frees the block and merges it with its free neighbours.
	void give_back(uint64_t addr);
	// Removes and returns the segments of device (all devices if < 0) with no
	// allocated block.
	std::vector<PoolSegment> drain_free_segments(int device);
	// Every segment with its blocks in address order (memory_snapshot).
	std::vector<std::pair<PoolSegment, std::vector<std::pair<uint64_t, PoolBlock>>>> snapshot() const;

private:
	// Small blocks keep their entry in blocks_ for the segment's life; the free
	// ones of a (device, stream, size class) wait in a LIFO list, so the common
	// small allocation and free touch no tree node.
	using SmallKey = std::tuple<int, int64_t, size_t>; // device, stream, size
	std::map<SmallKey, std::vector<uint64_t>> small_free_;
	std::vector<uint64_t> *small_list(int device, int64_t stream, size_t size);

	using FreeKey = std::tuple<int, int64_t, bool, size_t, uint64_t>; // device, stream, small, size, addr
	static FreeKey free_key(uint64_t addr, const PoolBlock &b) { return {b.device, b.stream, is_small(b.size), b.size, addr}; }
	void insert_free(uint64_t addr, PoolBlock b);

	std::map<uint64_t, PoolBlock> blocks_; // all blocks, by address
	std::set<FreeKey> free_;
	std::map<uint64_t, PoolSegment> segments_;
};

} // namespace torch_neuron
