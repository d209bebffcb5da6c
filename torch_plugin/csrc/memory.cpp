// Caching device allocator over neuron_alloc, pinned host allocator over
// neuron_host_alloc, the device guard (devices, streams, events), the PrivateUse1
// hooks and the generator.
#include "memory.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <map>
#include <set>
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

NeuronDeviceAllocator *g_dev_alloc = new NeuronDeviceAllocator;
void deleter(void *p) { g_dev_alloc->release(p); }

// ---- pinned host memory ----

void host_deleter(void *ctx);

class NeuronHostAllocator final : public at::HostAllocator {
public:
	struct Seg {
		neuron_host_buffer *buf;
		size_t size;
		bool in_use;
		std::vector<std::pair<neuron_queue *, uint64_t>> uses;
	};

	c10::DataPtr allocate(size_t n) override
	{
		if (n == 0)
			return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
		size_t size = 4096;
		while (size < n)
			size <<= 1;
		std::lock_guard lock(mu_);
		for (auto &[base, seg] : segs_) {
			if (seg.in_use || seg.size != size || !uses_done(seg))
				continue;
			seg.in_use = true;
			stats_.allocations.increase(1);
			return c10::DataPtr(reinterpret_cast<void *>(base), reinterpret_cast<void *>(base), &host_deleter,
					    c10::Device(c10::DeviceType::CPU));
		}
		neuron_host_buffer *buf = nullptr;
		neuron_status s = neuron_host_alloc(client(), size, &buf);
		if (s != NEURON_OK)
			throw_status(s, "allocating pinned host memory");
		const uintptr_t base = reinterpret_cast<uintptr_t>(neuron_host_ptr(buf));
		segs_[base] = Seg{buf, size, true, {}};
		stats_.allocations.increase(1);
		stats_.num_host_alloc++;
		return c10::DataPtr(reinterpret_cast<void *>(base), reinterpret_cast<void *>(base), &host_deleter,
				    c10::Device(c10::DeviceType::CPU));
	}

	c10::DeleterFnPtr raw_deleter() const override { return &host_deleter; }

	void copy_data(void *dest, const void *src, std::size_t count) const override { std::memcpy(dest, src, count); }

	void release(void *ctx)
	{
		std::lock_guard lock(mu_);
		auto it = segs_.find(reinterpret_cast<uintptr_t>(ctx));
		if (it != segs_.end()) {
			it->second.in_use = false;
			stats_.allocations.decrease(1);
		}
	}

	bool record_event(void *ptr, void *, c10::Stream stream) override
	{
		StreamQueues &sq = stream_queues(stream);
		neuron_event ev{};
		neuron_event_record(sq.dma, &ev);
		record(ptr, sq.dma, ev.value);
		return true;
	}

	void record(const void *p, neuron_queue *q, uint64_t seq)
	{
		std::lock_guard lock(mu_);
		if (Seg *s = find_locked(p, 1, nullptr))
			s->uses.emplace_back(q, seq);
	}

	void empty_cache() override
	{
		std::lock_guard lock(mu_);
		for (auto it = segs_.begin(); it != segs_.end();) {
			if (!it->second.in_use && uses_done(it->second)) {
				neuron_host_free(it->second.buf);
				it = segs_.erase(it);
			} else {
				++it;
			}
		}
	}

	at::HostStats get_stats() override
	{
		std::lock_guard lock(mu_);
		return stats_;
	}
	void reset_accumulated_stats() override {}
	void reset_peak_stats() override {}

	Seg *find_locked(const void *p, size_t n, uint64_t *offset)
	{
		const uintptr_t a = reinterpret_cast<uintptr_t>(p);
		auto it = segs_.upper_bound(a);
		if (it == segs_.begin())
			return nullptr;
		--it;
		if (a + n > it->first + it->second.size)
			return nullptr;
		if (offset)
			*offset = a - it->first;
		return &it->second;
	}

	neuron_host_buffer *find(const void *p, size_t n, uint64_t *offset)
	{
		if (!connected())
			return nullptr;
		std::lock_guard lock(mu_);
		Seg *s = find_locked(p, n, offset);
		return s ? s->buf : nullptr;
	}

private:
	static bool uses_done(Seg &s)
	{
		auto &u = s.uses;
		u.erase(std::remove_if(u.begin(), u.end(),
				       [](auto &e) {
					       neuron_fault f{};
					       neuron_queue_fault(e.first, &f);
					       return f.code != NEURON_FAULT_NONE || neuron_queue_completed(e.first) >= e.second;
				       }),
			u.end());
		return u.empty();
	}

	std::recursive_mutex mu_;
	std::map<uintptr_t, Seg> segs_;
	at::HostStats stats_;
};

NeuronHostAllocator *g_host_alloc = new NeuronHostAllocator;
void host_deleter(void *ctx) { g_host_alloc->release(ctx); }

// ---- device guard ----

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
	static constexpr c10::DeviceType T = c10::DeviceType::PrivateUse1;
	c10::DeviceType type() const override { return T; }
	c10::Device exchangeDevice(c10::Device d) const override
	{
		const c10::Device old(T, current_device());
		if (d.index() >= 0)
			set_current_device(d.index());
		return old;
	}
	c10::Device getDevice() const override { return c10::Device(T, current_device()); }
	void setDevice(c10::Device d) const override
	{
		if (d.index() >= 0)
			set_current_device(d.index());
	}
	void uncheckedSetDevice(c10::Device d) const noexcept override
	{
		if (d.index() >= 0 && d.index() < kMaxDev)
			set_current_device(d.index());
	}
	c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
	c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index() < 0 ? current_device() : d.index()); }
	c10::Stream getStreamFromGlobalPool(c10::Device d, bool = false) const override { return pool_stream(d.index()); }
	c10::Stream getNewStream(c10::Device d, int = 0) const override { return pool_stream(d.index()); }
	c10::Stream exchangeStream(c10::Stream s) const override
	{
		const c10::Stream old = current_stream(s.device_index());
		set_current_stream(s);
		return old;
	}
	c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(device_count()); }
	bool queryStream(const c10::Stream &s) const override { return query_stream(stream_queues(s)); }
	void synchronizeStream(const c10::Stream &s) const override { sync_stream(stream_queues(s)); }
	void synchronizeDevice(const c10::DeviceIndex d) const override { sync_device(d < 0 ? current_device() : d); }

	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex, const c10::EventFlag) const override
	{
		auto *ev = static_cast<Event *>(*event);
		if (!ev) {
			ev = new Event;
			*event = ev;
		}
		StreamQueues &sq = stream_queues(stream);
		ev->value = stream_point(sq);
		ev->sq = &sq;
		ev->queue = sq.core;
		ev->queue_id = neuron_queue_id(sq.core);
		ev->done_ns = -1;
	}
	void block(void *event, const c10::Stream &stream) const override
	{
		auto *ev = static_cast<Event *>(event);
		if (!ev || ev->value == 0)
			return;
		StreamQueues &sq = stream_queues(stream);
		if (ev->queue == sq.core)
			return;
		neuron_event e{ev->queue_id, ev->value};
		std::lock_guard lock(sq.mu);
		neuron_status s = neuron_queue_wait_event(sq.core, &e);
		if (s != NEURON_OK)
			stream_failed(sq, s, "waiting for an event");
		// DMA work of the stream waits for its core work, so it is ordered too.
	}
	bool queryEvent(void *event) const override
	{
		auto *ev = static_cast<Event *>(event);
		if (!ev || ev->value == 0)
			return true;
		const bool done = neuron_queue_completed(ev->queue) >= ev->value;
		if (done && ev->done_ns < 0)
			ev->done_ns = static_cast<int64_t>(now_ns());
		return done;
	}
	void synchronizeEvent(void *event) const override
	{
		auto *ev = static_cast<Event *>(event);
		if (!ev || ev->value == 0)
			return;
		neuron_status s = neuron_queue_wait(ev->queue, ev->value, -1);
		if (s != NEURON_OK)
			stream_failed(*ev->sq, s, "waiting for an event");
		if (ev->done_ns < 0)
			ev->done_ns = static_cast<int64_t>(now_ns());
	}
	void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override { delete static_cast<Event *>(event); }
	double elapsedTime(void *e1, void *e2, const c10::DeviceIndex) const override
	{
		// The simulated device has no timestamps: completion times as the host sees them.
		synchronizeEvent(e1);
		synchronizeEvent(e2);
		auto *a = static_cast<Event *>(e1), *b = static_cast<Event *>(e2);
		TORCH_CHECK(a && b && a->value && b->value, "neuron: elapsed_time needs two recorded events");
		return std::max<int64_t>(0, b->done_ns - a->done_ns) / 1e6;
	}
	void recordDataPtrOnStream(const c10::DataPtr &p, const c10::Stream &s) const override
	{
		g_dev_alloc->recordStream(p, s);
	}
};

// ---- generator ----

struct NeuronGenerator : public at::CPUGeneratorImpl {
	explicit NeuronGenerator(c10::DeviceIndex idx)
	{
		device_ = c10::Device(c10::DeviceType::PrivateUse1, idx);
		key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
	}
};

const at::Generator &default_generator(c10::DeviceIndex idx)
{
	static std::array<at::Generator, kMaxDev> gens;
	static std::once_flag once[kMaxDev];
	if (idx < 0)
		idx = current_device();
	TORCH_CHECK(idx >= 0 && idx < kMaxDev, "neuron: bad device index ", idx);
	std::call_once(once[idx], [&] {
		gens[idx] = at::make_generator<NeuronGenerator>(idx);
		gens[idx].set_current_seed(67280421310721ull);
	});
	return gens[idx];
}

// ---- hooks ----

struct Hooks final : public at::PrivateUse1HooksInterface {
	bool isBuilt() const override { return true; }
	bool isAvailable() const override { return device_count() > 0; }
	const at::Generator &getDefaultGenerator(c10::DeviceIndex idx) const override { return default_generator(idx); }
	at::Generator getNewGenerator(c10::DeviceIndex idx = -1) const override
	{
		return at::make_generator<NeuronGenerator>(idx < 0 ? current_device() : idx);
	}
	at::Device getDeviceFromPtr(void *) const override { return at::Device(c10::DeviceType::PrivateUse1, current_device()); }
	bool isPinnedPtr(const void *p) const override { return g_host_alloc->find(p, 1, nullptr) != nullptr; }
	at::Allocator *getPinnedMemoryAllocator() const override { return g_host_alloc; }
	bool hasPrimaryContext(c10::DeviceIndex) const override { return connected(); }
	c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
	void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
	c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override
	{
		const int old = current_device();
		if (d >= 0)
			set_current_device(d);
		return old;
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
	void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override
	{
		c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
		const size_t old = impl->nbytes();
		c10::DataPtr fresh = g_dev_alloc->allocate(newsize);
		const size_t keep = std::min(old, newsize);
		if (keep)
			g_dev_alloc->copy_data(fresh.get(), impl->data(), keep);
		impl->set_data_ptr_noswap(std::move(fresh));
		impl->set_nbytes(newsize);
	}
};

struct Register {
	Register()
	{
		c10::SetAllocator(c10::DeviceType::PrivateUse1, g_dev_alloc);
		at::setHostAllocator(c10::DeviceType::PrivateUse1, g_host_alloc);
		at::RegisterPrivateUse1HooksInterface(new Hooks);
	}
};
Register g_register;

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

} // namespace

c10::Allocator *device_allocator() { return g_dev_alloc; }
c10::Allocator *host_allocator() { return g_host_alloc; }
neuron_host_buffer *find_pinned(const void *p, size_t n, uint64_t *offset) { return g_host_alloc->find(p, n, offset); }
void pinned_record_use(const void *p, neuron_queue *q, uint64_t seq) { g_host_alloc->record(p, q, seq); }
c10::DataPtr staging(size_t n) { return g_host_alloc->allocate(n); }

MemStats mem_stats(int device)
{
	const auto st = g_dev_alloc->getDeviceStats(device);
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
void reset_peak(int device) { g_dev_alloc->resetPeakStats(device); }
void empty_cache()
{
	g_dev_alloc->emptyCache();
	g_host_alloc->empty_cache();
}

} // namespace torch_neuron
