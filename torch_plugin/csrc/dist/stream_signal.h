// The completion of a process group's collectives as a timeline the device can
// wait on, so that Work.wait() orders the caller's stream after a collective
// without blocking the host (as NCCL's work.wait() makes the current CUDA stream
// wait for the NCCL stream).
//
// neurond runs a collective outside any queue of the rank (a request on the
// group's channel), so there is no command on the caller's stream to order after.
// Instead each device the group is used on gets a DMA queue of the rank's own
// tenant, the signal queue: the caller reserves the value the queue reaches once
// a collective ended (its n-th collective on that device: n), the worker thread
// submits a NOP there when it did, and a stream waits for the value with a
// device-side cross-queue wait (neuron_cmd.wait: a command of one queue does not
// start before another queue of the tenant completed `value` commands; waiting
// for a value not submitted yet is allowed). When a collective fails the worker
// destroys the queue: every wait on it faults (NEURON_FAULT_BAD_WAIT), so the
// failure reaches the stream (its next synchronisation raises, naming the cause)
// instead of leaving it blocked for ever.
//
// Threads: reserve() and order() on the caller's thread (order() also from
// Work.wait() on any thread), signal()/fail() on the worker thread; the members
// are under mu_.
#pragma once

#include <neuron/neuron.h>

#include <c10/core/Stream.h>

#include <cstdint>
#include <mutex>
#include <string>

namespace torch_neuron::dist {

class StreamSignal {
public:
	explicit StreamSignal(int device);
	~StreamSignal();
	StreamSignal(const StreamSignal &) = delete;
	StreamSignal &operator=(const StreamSignal &) = delete;

	int device() const { return device_; }
	// Caller: the value that means "the next collective queued on this device ended".
	uint64_t reserve();
	// Caller: later work on `stream` waits (on the device) until `value` was signalled.
	void order(const c10::Stream &stream, uint64_t value);
	// Worker: the oldest collective not signalled yet ended successfully.
	void signal();
	// Worker: a collective failed; every wait on the queue, now or later, faults
	// and its stream reports `why`.
	void fail(const std::string &why);

private:
	int device_;
	std::mutex mu_;
	neuron_queue *queue_ = nullptr; // null once failed
	uint64_t queue_id_ = 0;
	uint64_t reserved_ = 0;
};

} // namespace torch_neuron::dist
