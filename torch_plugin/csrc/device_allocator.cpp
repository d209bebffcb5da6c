// The caching device (HBM) allocator over neuron_alloc, per device and stream
// (block_pool.h: small blocks <= 1 MiB in power-of-two classes, larger ones cut
// from the best-fitting free block and merged back when freed); a freed block is
// reused on its stream at once and on others after their recorded work; on out-of-memory it syncs, returns the cache to neurond and
// retries, then raises torch.OutOfMemoryError. Owner of its maps: one recursive
// mutex (never taken with the GIL's help: deleters run inside Python's GC).
#include "block_pool.h"
#include "memory.h"
#include "graph_capture.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_neuron {

namespace {

constexpr int kMaxDev = 16;

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

void stat_add(c10::CachingAllocator::StatArray &a, bool small, int64_t delta)
{
	for (int k : {static_cast<int>(StatType::AGGREGATE), small ? 1 : 2}) {
		auto &s = a[k];
		s.current += delta;
		if (delta > 0)
			s.allocated += delta;
		else
			s.freed -= delta;
		s.peak = std::max(s.peak, s.current);
	}
}

void deleter(void *p);

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
public:
	c10::DataPtr allocate(size_t n) override
	{
		const int dev = current_device();
		const c10::Device device(c10::DeviceType::PrivateUse1, dev);
		if (n == 0)
			return c10::DataPtr(nullptr, device);
		if (!connected() || dev >= device_count())
			check_device(dev);
		const int64_t stream = current_stream(dev).id();
		const size_t size = BlockPool::round_size(n);
		const bool small = BlockPool::is_small(size);
		std::lock_guard lock(mu_);
		std::optional<uint64_t> cached = pool_.take(dev, stream, size, n);
		const uint64_t addr = cached ? *cached : device_alloc(dev, stream, size, n);
		auto &st = stats_[dev];
		stat_add(st.allocated_bytes, small, size);
		stat_add(st.active_bytes, small, size);
		stat_add(st.requested_bytes, small, n);
		stat_add(st.allocation, small, 1);
		stat_add(st.active, small, 1);
		if (capture_active()) [[unlikely]]
			capture_alloc(addr, size);
		return c10::DataPtr(reinterpret_cast<void *>(addr), reinterpret_cast<void *>(addr), &deleter, device);
	}

	c10::DeleterFnPtr raw_deleter() const override { return &deleter; }

	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		if (count == 0)
			return;
		neuron_cmd cmd;
		neuron_cmd_init(&cmd, NEURON_OP_COPY, 2);
		const int64_t sz[1] = {static_cast<int64_t>(count)};
		cmd.operands[0] = neuron_desc_contiguous(dev_addr(dest), NEURON_DTYPE_U8, 1, sz);
		cmd.operands[1] = neuron_desc_contiguous(dev_addr(src), NEURON_DTYPE_U8, 1, sz);
		submit_core(current_queues(-1), cmd);
	}

	void release(void *p) noexcept
	{
		if (!p)
			return;
		const uint64_t addr = dev_addr(p);
		if (capture_active()) [[unlikely]]
			capture_free(addr);
		std::vector<int64_t> others;
		int dev = 0;
		{
			std::lock_guard lock(mu_);
			PoolBlock *b = pool_.find(addr);
			if (!b)
				return;
			if (b->other_streams.empty()) { // the common case: one critical section
				free_locked(addr, *b);
				return;
			}
			others = b->other_streams;
			dev = b->device;
		}
		// A block used on other streams waits for them before it is reused (without
		// the lock: their submitters may allocate).
		for (int64_t s : others) {
			try {
				sync_stream(stream_queues(c10::Stream(c10::Stream::UNSAFE,
								      c10::Device(c10::DeviceType::PrivateUse1, dev), s)));
			} catch (...) {
			}
		}
		std::lock_guard lock(mu_);
		if (PoolBlock *b = pool_.find(addr))
			free_locked(addr, *b);
	}

	bool initialized() override { return connected(); }

	void emptyCache(c10::MempoolId_t = {0, 0}) override
	{
		if (!connected())
			return;
		for (int d = 0; d < device_count(); ++d)
			sync_device(d);
		std::lock_guard lock(mu_);
		release_cached_locked(-1);
	}

	void recordStream(const c10::DataPtr &ptr, c10::Stream stream) override
	{
		std::lock_guard lock(mu_);
		PoolBlock *b = pool_.find(dev_addr(ptr.get()));
		if (!b || b->stream == stream.id())
			return;
		auto &o = b->other_streams;
		if (std::find(o.begin(), o.end(), stream.id()) == o.end())
			o.push_back(stream.id());
	}

	DeviceStats getDeviceStats(c10::DeviceIndex device) override
	{
		std::lock_guard lock(mu_);
		return stats_[device];
	}

	void resetAccumulatedStats(c10::DeviceIndex device) override
	{
		std::lock_guard lock(mu_);
		auto &st = stats_[device];
		for (auto *a : {&st.allocation, &st.segment, &st.active, &st.allocated_bytes, &st.reserved_bytes,
				&st.active_bytes, &st.requested_bytes})
			for (auto &s : *a)
				s.allocated = s.freed = 0;
		st.num_alloc_retries = st.num_ooms = 0;
	}

	void resetPeakStats(c10::DeviceIndex device) override
	{
		std::lock_guard lock(mu_);
		auto &st = stats_[device];
		for (auto *a : {&st.allocation, &st.segment, &st.active, &st.allocated_bytes, &st.reserved_bytes,
				&st.active_bytes, &st.requested_bytes})
			for (auto &s : *a)
				s.peak = s.current;
	}

	std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override
	{
		struct neuron_device_info info{};
		check(neuron_device_info(client(), device, &info), "querying device memory");
		return {info.hbm_bytes - info.hbm_used_bytes, info.hbm_bytes};
	}

	// Segments and blocks for torch.neuron.memory_snapshot().
	std::vector<std::pair<PoolSegment, std::vector<std::pair<uint64_t, PoolBlock>>>> snapshot()
	{
		std::lock_guard lock(mu_);
		return pool_.snapshot();
	}

private:
	void free_locked(uint64_t addr, const PoolBlock &found)
	{
		const int dev = found.device;
		const size_t size = found.size, requested = found.requested;
		pool_.give_back(addr);
		auto &st = stats_[dev];
		const bool small = BlockPool::is_small(size);
		stat_add(st.allocated_bytes, small, -static_cast<int64_t>(size));
		stat_add(st.active_bytes, small, -static_cast<int64_t>(size));
		stat_add(st.requested_bytes, small, -static_cast<int64_t>(requested));
		stat_add(st.allocation, small, -1);
		stat_add(st.active, small, -1);
	}

	// A new segment of `size` bytes holding one allocated block.
	uint64_t device_alloc(int dev, int64_t stream, size_t size, size_t requested)
	{
		uint64_t addr = 0;
		neuron_status s = neuron_alloc(client(), dev, size, 256, &addr);
		if (s == NEURON_ERR_NO_MEMORY) {
			stats_[dev].num_alloc_retries++;
			sync_device(dev);
			release_cached_locked(dev);
			s = neuron_alloc(client(), dev, size, 256, &addr);
		}
		if (s == NEURON_ERR_NO_MEMORY) {
			stats_[dev].num_ooms++;
			const std::string msg = neuron_last_error();
			const auto &st = stats_[dev];
			TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: out of device memory: tried to allocate ", size,
					 " bytes on neuron:", dev, "; this process holds ",
					 st.allocated_bytes[0].current, " bytes in tensors and ",
					 st.reserved_bytes[0].current, " bytes reserved (", msg,
					 "). Free tensors, call torch.neuron.empty_cache(), or use smaller batches.");
		}
		if (s != NEURON_OK)
			throw_status(s, "allocating device memory");
		pool_.add_segment(dev, stream, addr, size, requested);
		stat_add(stats_[dev].reserved_bytes, BlockPool::is_small(size), size);
		stat_add(stats_[dev].segment, BlockPool::is_small(size), 1);
		stats_[dev].num_device_alloc++;
		return addr;
	}

	void release_cached_locked(int dev)
	{
		for (const PoolSegment &seg : pool_.drain_free_segments(dev)) {
			neuron_free(client(), seg.device, seg.addr);
			auto &st = stats_[seg.device];
			stat_add(st.reserved_bytes, BlockPool::is_small(seg.size), -static_cast<int64_t>(seg.size));
			stat_add(st.segment, BlockPool::is_small(seg.size), -1);
			st.num_device_free++;
		}
	}

	std::recursive_mutex mu_;
	BlockPool pool_;
	std::array<DeviceStats, kMaxDev> stats_{};
};

NeuronDeviceAllocator &dev_alloc()
{
	static auto *a = new NeuronDeviceAllocator; // leaked: tensors may die at exit
	return *a;
}
void deleter(void *p) { dev_alloc().release(p); }

} // namespace

c10::DeviceAllocator *device_allocator() { return &dev_alloc(); }

MemStats mem_stats(int device)
{
	const auto st = dev_alloc().getDeviceStats(device);
	MemStats m;
	m.allocated = st.allocated_bytes[0].current;
	m.peak_allocated = st.allocated_bytes[0].peak;
	m.reserved = st.reserved_bytes[0].current;
	m.peak_reserved = st.reserved_bytes[0].peak;
	m.alloc_count = st.allocation[0].allocated;
	m.free_count = st.allocation[0].freed;
	m.segments = st.segment[0].current;
	return m;
}

void reset_peak(int device) { dev_alloc().resetPeakStats(device); }

std::vector<int64_t> memory_snapshot_flat()
{
	std::vector<int64_t> out;
	for (const auto &[seg, blocks] : dev_alloc().snapshot()) {
		out.insert(out.end(), {seg.device, static_cast<int64_t>(seg.addr), static_cast<int64_t>(seg.size), seg.stream,
				       static_cast<int64_t>(blocks.size())});
		for (const auto &[addr, b] : blocks)
			out.insert(out.end(), {static_cast<int64_t>(addr), static_cast<int64_t>(b.size),
					       static_cast<int64_t>(b.requested), b.allocated ? 1 : 0});
	}
	return out;
}

void empty_cache()
{
	dev_alloc().emptyCache();
	host_allocator()->empty_cache();
}

namespace {
struct Register {
	Register() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &dev_alloc()); }
} g_register;

} // namespace

} // namespace torch_neuron
