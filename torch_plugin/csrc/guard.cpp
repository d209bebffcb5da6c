// The PrivateUse1 device guard: current device, streams (a core queue and a DMA
// queue each, runtime.h) and events (a point on a stream's core timeline),
// through which torch.Stream, torch.Event and torch.accelerator reach us.
#include "adaptive_eager.h"
#include "memory.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace torch_neuron {

namespace {

constexpr int kMaxDev = 16;


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

	void record(void **event, const c10::Stream &stream, const c10::DeviceIndex, const c10::EventFlag flag) const override
	{
		auto *ev = static_cast<Event *>(*event);
		if (!ev) {
			ev = new Event;
			*event = ev;
		}
		StreamQueues &sq = stream_queues(stream);
		ev->value = stream_point(sq);
		// BACKEND_DEFAULT is what torch.Event(enable_timing=True) passes.
		if (flag == c10::EventFlag::BACKEND_DEFAULT)
			ev->value = stamp_event(*ev, sq);
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
		adaptive_flush_locked(sq); // the wait follows the work issued before it
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
		synchronizeEvent(e1);
		synchronizeEvent(e2);
		auto *a = static_cast<Event *>(e1), *b = static_cast<Event *>(e2);
		TORCH_CHECK(a && b && a->value && b->value, "neuron: elapsed_time needs two recorded events");
		if (a->stamp && b->stamp)
			return static_cast<double>(read_stamp(*b) - read_stamp(*a)) / 1e6;
		// Events recorded without timing: completion times as the host saw them.
		return std::max<int64_t>(0, b->done_ns - a->done_ns) / 1e6;
	}

	// Submits the event's TIMESTAMP after the stream's work so far; its seq.
	static uint64_t stamp_event(Event &ev, StreamQueues &sq)
	{
		if (!ev.stamp) {
			const int old = current_device();
			set_current_device(sq.device);
			ev.stamp = device_allocator()->allocate(sizeof(int64_t));
			set_current_device(old);
		}
		neuron_cmd cmd;
		neuron_cmd_init(&cmd, NEURON_OP_TIMESTAMP, 1);
		const int64_t one[1] = {1};
		cmd.operands[0] = neuron_desc_contiguous(dev_addr(ev.stamp.get()), NEURON_DTYPE_I64, 1, one);
		return submit_core(sq, cmd);
	}

	static int64_t read_stamp(const Event &ev)
	{
		int64_t ns = 0;
		check(neuron_memcpy_d2h(ev.sq->dma, &ns, dev_addr(ev.stamp.get()), sizeof(ns)), "reading an event's timestamp");
		return ns;
	}
	void recordDataPtrOnStream(const c10::DataPtr &p, const c10::Stream &s) const override
	{
		device_allocator()->recordStream(p, s);
	}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

} // namespace

} // namespace torch_neuron
