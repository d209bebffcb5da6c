// The caching device (HBM) allocator over neuron_alloc: per device and stream
// size classes (small blocks <= 1 MiB rounded to powers of two, larger ones to
// 2 MiB); a freed block is reused on its stream at once and on others after
// their recorded work; on out-of-memory it syncs, returns the cache to neurond and
// retries, then raises torch.OutOfMemoryError. Owner of its maps: one recursive
// mutex (never taken with the GIL's help: deleters run inside Python's GC).
#include "memory.h"

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

size_t round_size(size_t n)
{
	if (n <= (1u << 20)) {
		size_t r = 512;
		while (r < n)
			r <<= 1;
		return r;
	}
	const size_t step = 2u << 20;
	return (n + step - 1) / step * step;
}

struct Block {
	int device;
	int64_t stream;
	size_t size;
	size_t requested;
	std::vector<int64_t> other_streams;
};

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
		const size_t size = round_size(n);
		std::lock_guard lock(mu_);
		uint64_t addr = 0;
		auto &fl = free_[key(dev, stream, size)];
		if (!fl.empty()) {
			addr = fl.back();
			fl.pop_back();
		} else {
			addr = device_alloc(dev, size);
		}
		blocks_[addr] = Block{dev, stream, size, n, {}};
		auto &st = stats_[dev];
		stat_add(st.allocated_bytes, size <= (1u << 20), size);
		stat_add(st.active_bytes, size <= (1u << 20), size);
		stat_add(st.requested_bytes, size <= (1u << 20), n);
		stat_add(st.allocation, size <= (1u << 20), 1);
		stat_add(st.active, size <= (1u << 20), 1);
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
		std::vector<int64_t> others;
		int dev = 0;
		{
			std::lock_guard lock(mu_);
			auto it = blocks_.find(addr);
			if (it == blocks_.end())
				return;
			others = it->second.other_streams;
			dev = it->second.device;
		}
		// A block used on other streams waits for them before it is reused.
		for (int64_t s : others) {
			try {
				sync_stream(stream_queues(c10::Stream(c10::Stream::UNSAFE,
								      c10::Device(c10::DeviceType::PrivateUse1, dev), s)));
			} catch (...) {
			}
		}
		std::lock_guard lock(mu_);
		auto it = blocks_.find(addr);
		if (it == blocks_.end())
			return;
		const Block b = it->second;
		blocks_.erase(it);
		free_[key(b.device, b.stream, b.size)].push_back(addr);
		auto &st = stats_[b.device];
		const bool small = b.size <= (1u << 20);
		stat_add(st.allocated_bytes, small, -static_cast<int64_t>(b.size));
		stat_add(st.active_bytes, small, -static_cast<int64_t>(b.size));
		stat_add(st.requested_bytes, small, -static_cast<int64_t>(b.requested));
		stat_add(st.allocation, small, -1);
		stat_add(st.active, small, -1);
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
		auto it = blocks_.find(dev_addr(ptr.get()));
		if (it == blocks_.end() || it->second.stream == stream.id())
			return;
		auto &o = it->second.other_streams;
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

private:
	struct Key {
		int device;
		int64_t stream;
		size_t size;
		bool operator<(const Key &o) const
		{
			return std::tie(device, stream, size) < std::tie(o.device, o.stream, o.size);
		}
	};
	static Key key(int d, int64_t s, size_t n) { return Key{d, s, n}; }

	uint64_t device_alloc(int dev, size_t size)
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
		segments_[addr] = {dev, size};
		stat_add(stats_[dev].reserved_bytes, size <= (1u << 20), size);
		stat_add(stats_[dev].segment, size <= (1u << 20), 1);
		stats_[dev].num_device_alloc++;
		return addr;
	}

	void release_cached_locked(int dev)
	{
		for (auto it = free_.begin(); it != free_.end();) {
			if (dev >= 0 && it->first.device != dev) {
				++it;
				continue;
			}
			for (uint64_t addr : it->second) {
				neuron_free(client(), it->first.device, addr);
				auto seg = segments_.find(addr);
				if (seg != segments_.end()) {
					stat_add(stats_[seg->second.first].reserved_bytes, seg->second.second <= (1u << 20),
						 -static_cast<int64_t>(seg->second.second));
					stat_add(stats_[seg->second.first].segment, seg->second.second <= (1u << 20), -1);
					stats_[seg->second.first].num_device_free++;
					segments_.erase(seg);
				}
			}
			it = free_.erase(it);
		}
	}

	std::recursive_mutex mu_;
	std::unordered_map<uint64_t, Block> blocks_;
	std::map<Key, std::vector<uint64_t>> free_;
	std::unordered_map<uint64_t, std::pair<int, size_t>> segments_;
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
