#include "block_pool.h"

#include <algorithm>

namespace torch_neuron {

size_t BlockPool::round_size(size_t n)
{
	if (is_small(n)) {
		size_t r = 512;
		while (r < n)
			r <<= 1;
		return r;
	}
	return (n + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void BlockPool::insert_free(uint64_t addr, PoolBlock b)
{
	b.allocated = false;
	b.requested = 0;
	b.other_streams.clear();
	free_.insert(free_key(addr, b));
	blocks_[addr] = std::move(b);
}

std::vector<uint64_t> *BlockPool::small_list(int device, int64_t stream, size_t size)
{
	return &small_free_[SmallKey{device, stream, size}];
}

std::optional<uint64_t> BlockPool::take(int device, int64_t stream, size_t size, size_t requested)
{
	const bool small = is_small(size);
	if (small) {
		std::vector<uint64_t> *list = small_list(device, stream, size);
		if (list->empty())
			return std::nullopt;
		const uint64_t addr = list->back();
		list->pop_back();
		PoolBlock &b = blocks_.at(addr);
		b.requested = requested;
		b.allocated = true;
		return addr;
	}
	auto it = free_.lower_bound(FreeKey{device, stream, small, size, 0});
	if (it == free_.end() || std::get<0>(*it) != device || std::get<1>(*it) != stream || std::get<2>(*it) != small)
		return std::nullopt;
	const size_t have = std::get<3>(*it);
	const uint64_t addr = std::get<4>(*it);
	free_.erase(it);
	PoolBlock &b = blocks_.at(addr);
	if (have > size) { // the rest stays free in the same segment
		PoolBlock rest = b;
		rest.size = have - size;
		insert_free(addr + size, std::move(rest));
	}
	PoolBlock &taken = blocks_.at(addr);
	taken.size = size;
	taken.requested = requested;
	taken.allocated = true;
	return addr;
}

void BlockPool::add_segment(int device, int64_t stream, uint64_t addr, size_t size, size_t requested)
{
	segments_[addr] = PoolSegment{device, stream, addr, size};
	PoolBlock b;
	b.device = device;
	b.stream = stream;
	b.segment = addr;
	b.size = size;
	b.requested = requested;
	b.allocated = true;
	blocks_[addr] = std::move(b);
}

PoolBlock *BlockPool::find(uint64_t addr)
{
	auto it = blocks_.find(addr);
	return it != blocks_.end() && it->second.allocated ? &it->second : nullptr;
}

void BlockPool::give_back(uint64_t addr)
{
	auto it = blocks_.find(addr);
	if (it == blocks_.end() || !it->second.allocated)
		return;
	if (is_small(it->second.size)) { // a whole segment: nothing to merge
		PoolBlock &b = it->second;
		b.allocated = false;
		b.requested = 0;
		b.other_streams.clear();
		small_list(b.device, b.stream, b.size)->push_back(addr);
		return;
	}
	uint64_t start = addr;
	PoolBlock merged = it->second;
	// The next block of the segment, if free, joins this one.
	if (auto next = std::next(it); next != blocks_.end() && !next->second.allocated &&
					next->second.segment == merged.segment) {
		free_.erase(free_key(next->first, next->second));
		merged.size += next->second.size;
		blocks_.erase(next);
	}
	// So does the previous one, which then holds the merged block.
	if (it != blocks_.begin()) {
		auto prev = std::prev(it);
		if (!prev->second.allocated && prev->second.segment == merged.segment) {
			free_.erase(free_key(prev->first, prev->second));
			start = prev->first;
			merged.size += prev->second.size;
			blocks_.erase(it);
		}
	}
	insert_free(start, std::move(merged));
}

std::vector<PoolSegment> BlockPool::drain_free_segments(int device)
{
	std::vector<PoolSegment> out;
	for (auto it = segments_.begin(); it != segments_.end();) {
		const PoolSegment seg = it->second;
		auto b = blocks_.find(seg.addr);
		const bool whole_free = b != blocks_.end() && !b->second.allocated && b->second.size == seg.size;
		if ((device >= 0 && seg.device != device) || !whole_free) {
			++it;
			continue;
		}
		if (is_small(seg.size)) {
			std::vector<uint64_t> *list = small_list(seg.device, seg.stream, seg.size);
			if (auto f = std::find(list->begin(), list->end(), seg.addr); f != list->end())
				list->erase(f);
		} else {
			free_.erase(free_key(b->first, b->second));
		}
		blocks_.erase(b);
		out.push_back(seg);
		it = segments_.erase(it);
	}
	return out;
}

std::vector<std::pair<PoolSegment, std::vector<std::pair<uint64_t, PoolBlock>>>> BlockPool::snapshot() const
{
	std::vector<std::pair<PoolSegment, std::vector<std::pair<uint64_t, PoolBlock>>>> out;
	for (const auto &[base, seg] : segments_) {
		std::vector<std::pair<uint64_t, PoolBlock>> blocks;
		for (auto it = blocks_.lower_bound(base); it != blocks_.end() && it->first < base + seg.size; ++it)
			blocks.emplace_back(it->first, it->second);
		out.emplace_back(seg, std::move(blocks));
	}
	return out;
}

} // namespace torch_neuron
