#include "prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

namespace neuron::chip {

namespace {

size_t page_size()
{
	static const size_t n = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	return n;
}

// r widened to whole pages; empty when null or under one step.
Prefault::Range page_span(Prefault::Range r)
{
	if (!r.p)
		return {};
	const size_t page = page_size();
	const auto lo = reinterpret_cast<uintptr_t>(r.p) / page * page;
	const auto hi = (reinterpret_cast<uintptr_t>(r.p) + r.len + page - 1) / page * page;
	if (hi - lo < Prefault::kStepPages * page)
		return {};
	return {reinterpret_cast<std::byte *>(lo), hi - lo};
}

// Backs [p, p + len) with writable pages without changing their contents.
void populate(std::byte *p, size_t len)
{
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return;
	// Older kernels (EINVAL): a write fault per page by an atomic add of zero, which
	// leaves any value, even one another thread is writing, as it was.
	if (errno == EINVAL)
		for (size_t off = 0; off < len; off += page_size())
			reinterpret_cast<std::atomic<unsigned char> *>(p + off)->fetch_add(0, std::memory_order_relaxed);
}

} // namespace

void Prefault::reset(Range output, Range arena)
{
	ranges_[0] = page_span(output);
	ranges_[1] = page_span(arena);
	total_ = 0;
	for (const Range &r : ranges_)
		total_ += (r.len + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
	next_.store(0, std::memory_order_relaxed);
	std::lock_guard lock(mutex_);
	returned_.clear();
}

void Prefault::give_back(Range rest)
{
	if (rest.len == 0)
		return;
	std::lock_guard lock(mutex_);
	returned_.push_back(rest);
}

std::optional<Prefault::Range> Prefault::claim()
{
	{
		std::lock_guard lock(mutex_);
		if (!returned_.empty()) {
			const Range r = returned_.back();
			returned_.pop_back();
			return r;
		}
	}
	if (next_.load(std::memory_order_relaxed) >= total_)
		return std::nullopt;
	size_t off = next_.fetch_add(kChunkBytes, std::memory_order_relaxed);
	if (off >= total_)
		return std::nullopt;
	// Chunks never straddle the two ranges: the first range's last one is short.
	for (const Range &r : ranges_) {
		const size_t rounded = (r.len + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
		if (off < rounded)
			return Range{r.p + off, std::min(kChunkBytes, r.len - off)};
		off -= rounded;
	}
	return std::nullopt;
}

Prefault::Chunk::Chunk(Range r) : r_(r), pages_(r.len / page_size())
{
	// If mincore fails, every page counts as not backed (populating is harmless).
	// (A page only read so far maps the shared zero page and counts as backed; its
	// first write still faults, in a tile.)
	if (pages_ > sizeof resident_ || mincore(r.p, r.len, resident_) != 0)
		std::memset(resident_, 0, sizeof resident_);
}

Prefault::Range Prefault::Chunk::rest() const
{
	return {r_.p + next_ * page_size(), (pages_ - next_) * page_size()};
}

bool Prefault::Chunk::step()
{
	while (next_ < pages_ && (resident_[next_] & 1))
		++next_;
	if (next_ == pages_)
		return false;
	// The next run of pages not backed, at most kStepPages long.
	size_t end = next_;
	while (end < pages_ && end - next_ < kStepPages && !(resident_[end] & 1))
		++end;
	populate(r_.p + next_ * page_size(), (end - next_) * page_size());
	next_ = end;
	return true;
}

} // namespace neuron::chip
