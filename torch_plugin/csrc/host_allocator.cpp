// Pinned host memory: PyTorch's caching host allocator (at::CachingHostAllocatorImpl:
// power-of-two size classes, per-class free lists, blocks reused only after the
// events recorded for them completed) over neuron host buffers, which neurond maps
// too, so DMA copies read and write them directly. An event is a point on a
// stream's DMA queue (the queue and its sequence number). Lock: the Impl's own
// mutexes, plus segs_mu_ for the address map find_pinned() searches.
#include "memory.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>

namespace torch_neuron {

namespace {

struct DmaPoint {
	neuron_queue *queue = nullptr;
	uint64_t seq = 0;
};

struct Segment {
	neuron_host_buffer *buf;
	size_t size;
};

// The address map of every live host buffer (for find_pinned, which takes any
// pointer inside one). Leaked with the allocator.
struct Segments {
	std::mutex mu;
	std::map<uintptr_t, Segment> by_base;
};
Segments &segments()
{
	static auto *s = new Segments;
	return *s;
}

struct NeuronHostAllocatorImpl final : at::CachingHostAllocatorImpl<c10::Stream, DmaPoint> {
private:
	void allocate_host_memory(size_t size, void **ptr) override
	{
		neuron_host_buffer *buf = nullptr;
		neuron_status s = neuron_host_alloc(client(), size, &buf);
		if (s != NEURON_OK)
			throw_status(s, "allocating pinned host memory");
		*ptr = neuron_host_ptr(buf);
		std::lock_guard lock(segments().mu);
		segments().by_base[reinterpret_cast<uintptr_t>(*ptr)] = Segment{buf, size};
	}

	void free_block(at::HostBlock<c10::Stream> *block) override
	{
		neuron_host_buffer *buf = nullptr;
		{
			std::lock_guard lock(segments().mu);
			auto it = segments().by_base.find(reinterpret_cast<uintptr_t>(block->ptr_));
			if (it == segments().by_base.end())
				return;
			buf = it->second.buf;
			segments().by_base.erase(it);
		}
		neuron_host_free(buf);
	}

	// The block is free again once the stream's DMA work submitted so far is done.
	void record_stream(std::optional<std::vector<DmaPoint>> &events, c10::Stream stream) override
	{
		StreamQueues &sq = stream_queues(stream);
		neuron_event ev{};
		neuron_event_record(sq.dma, &ev);
		events->push_back(DmaPoint{sq.dma, ev.value});
	}

	bool query_event(DmaPoint &e) override
	{
		neuron_fault f{};
		neuron_queue_fault(e.queue, &f);
		return f.code != NEURON_FAULT_NONE || neuron_queue_completed(e.queue) >= e.seq;
	}

	c10::Stream get_current_stream() const override { return current_stream(current_device()); }
	bool stream_is_capturing(c10::Stream) const override { return false; }
};

void host_deleter(void *ctx);

struct NeuronHostAllocator final : at::CachingHostAllocatorInterface<NeuronHostAllocatorImpl, host_deleter> {};

NeuronHostAllocator &host_alloc()
{
	static auto *a = new NeuronHostAllocator; // leaked: pinned tensors may die at exit
	return *a;
}
void host_deleter(void *ctx) { host_alloc().free(ctx); }

struct Register {
	Register() { at::setHostAllocator(c10::DeviceType::PrivateUse1, &host_alloc()); }
} g_register;

} // namespace

at::HostAllocator *host_allocator() { return &host_alloc(); }

neuron_host_buffer *find_pinned(const void *p, size_t n, uint64_t *offset)
{
	if (!connected())
		return nullptr;
	const uintptr_t a = reinterpret_cast<uintptr_t>(p);
	std::lock_guard lock(segments().mu);
	auto it = segments().by_base.upper_bound(a);
	if (it == segments().by_base.begin())
		return nullptr;
	--it;
	if (a + n > it->first + it->second.size)
		return nullptr;
	if (offset)
		*offset = a - it->first;
	return it->second.buf;
}

void pinned_record_use(const c10::DataPtr &block, const StreamQueues &sq)
{
	const c10::Stream stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, sq.device), sq.id);
	host_alloc().record_event(block.get(), block.get_context(), stream);
}

c10::DataPtr staging(size_t n) { return host_alloc().allocate(n); }

} // namespace torch_neuron
