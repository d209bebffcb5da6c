#include "gemm_packs.h"

#include <algorithm>
#include <map>
#include <new>

#include <sys/mman.h>

namespace neuron::kernels {

namespace {

// Recycled buffers by capacity (floats). Owner: the process; mutex guards all.
class PackPool {
public:
	// A buffer of at least n and under 2n floats, or nullptr.
	float *take(size_t n, size_t &capacity)
	{
		std::lock_guard lock(mutex_);
		auto it = free_.lower_bound(n);
		if (it == free_.end() || it->first >= 2 * n)
			return nullptr;
		capacity = it->first;
		float *p = it->second;
		bytes_ -= capacity * sizeof(float);
		free_.erase(it);
		return p;
	}

	void give(float *p, size_t capacity)
	{
		if (!p)
			return;
		{
			std::lock_guard lock(mutex_);
			if (bytes_ + capacity * sizeof(float) <= kPackPoolBytes) {
				free_.emplace(capacity, p);
				bytes_ += capacity * sizeof(float);
				return;
			}
		}
		std::free(p);
	}

private:
	std::mutex mutex_;
	std::multimap<size_t, float *> free_;
	size_t bytes_ = 0;
};

PackPool &pack_pool()
{
	// Never destroyed: thread_local buffers may be released after static destructors.
	static PackPool *pool = new PackPool;
	return *pool;
}

} // namespace

AlignedFloats::~AlignedFloats() { release(); }

void AlignedFloats::release()
{
	pack_pool().give(p_, n_);
	p_ = nullptr;
	n_ = 0;
}

float *AlignedFloats::reserve(size_t n)
{
	if (n <= n_ && p_)
		return p_;
	n = std::max<size_t>(n, 1);
	size_t capacity = 0;
	float *q = pack_pool().take(n, capacity);
	if (!q) {
		// Buffers of 2 MiB and more on transparent huge pages where the host
		// allows them (madvise mode): a packed block then lies in physically
		// contiguous memory, so which L2 sets its panels use does not depend on
		// where the kernel happened to put each 4 KiB page.
		constexpr size_t kLine = 64, kHuge = size_t{2} << 20;
		const size_t align = n * sizeof(float) >= kHuge ? kHuge : kLine;
		const size_t bytes = (n * sizeof(float) + align - 1) / align * align;
		q = static_cast<float *>(std::aligned_alloc(align, bytes));
		if (!q)
			throw std::bad_alloc();
		if (align == kHuge)
			madvise(q, bytes, MADV_HUGEPAGE); // advice only: 4 KiB pages otherwise
		capacity = bytes / sizeof(float);
	}
	pack_pool().give(p_, n_);
	p_ = q;
	n_ = capacity;
	return p_;
}

size_t GemmPacks::KeyHash::operator()(const Key &k) const
{
	size_t h = std::hash<const void *>()(k.p);
	for (const int64_t v : {int64_t{k.dt}, int64_t{k.width}, k.rows, k.cols, k.rs, k.cs})
		h = h * 1000003u ^ std::hash<int64_t>()(v);
	return h;
}

void GemmPacks::reserve(size_t floats)
{
	std::lock_guard lock(mutex_);
	map_.clear(); // a new command: no block of the last one may be found
	bytes_ = 0;
	arena_floats_ = std::min(floats, limit_ / sizeof(float));
	arena_used_ = 0;
	if (arena_floats_)
		arena_.reserve(arena_floats_);
}

const float *GemmPacks::get(const detail::Mat &m, int width, size_t floats, const std::function<void(float *)> &pack)
{
	const Key key{m.p, m.dt, width, m.rows, m.cols, m.rs, m.cs};
	std::shared_ptr<Entry> e;
	{
		std::lock_guard lock(mutex_);
		auto it = map_.find(key);
		if (it != map_.end()) {
			e = it->second;
		} else {
			if (bytes_ + floats * sizeof(float) > limit_)
				return nullptr;
			e = std::make_shared<Entry>();
			// Cache-line aligned slots: the kernels load whole panels.
			const size_t slot = (floats + 15) / 16 * 16;
			if (arena_used_ + slot <= arena_floats_) {
				e->data = arena_.data() + arena_used_;
				arena_used_ += slot;
			}
			map_.emplace(key, e);
			bytes_ += floats * sizeof(float);
		}
	}
	// A thread that finds the entry being packed waits for it (tens of
	// microseconds) rather than packing a second copy.
	std::call_once(e->once, [&] {
		float *dst = e->data ? e->data : e->own.reserve(floats);
		pack(dst);
		e->data = dst;
	});
	return e->data;
}

void GemmPacks::clear()
{
	std::lock_guard lock(mutex_);
	map_.clear();
	bytes_ = 0;
	arena_.release();
	arena_floats_ = arena_used_ = 0;
}

size_t GemmPacks::bytes() const
{
	std::lock_guard lock(mutex_);
	return bytes_;
}

} // namespace neuron::kernels
