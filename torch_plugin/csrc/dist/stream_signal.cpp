#include "stream_signal.h"

#include "../adaptive_eager.h"
#include "../queue_explain.h"
#include "../runtime.h"

#include <c10/util/Exception.h>

namespace torch_neuron::dist {

StreamSignal::StreamSignal(int device) : device_(device)
{
	check(neuron_queue_create(client(), static_cast<uint32_t>(device), NEURON_QUEUE_DMA, 0, 0, &queue_),
	      "creating the collective signal queue");
	queue_id_ = neuron_queue_id(queue_);
}

StreamSignal::~StreamSignal()
{
	std::lock_guard lock(mu_);
	if (!queue_)
		return;
	// Streams may still wait for NOPs submitted last, and a wait not yet reached
	// when the queue goes faults: let the device's streams pass their waits first
	// (destroy_process_group waits for the device, as NCCL's does).
	try {
		sync_device(device_);
	} catch (...) {
		// A stream that faulted reports it at its own next synchronisation.
	}
	neuron_queue_destroy(queue_);
}

uint64_t StreamSignal::reserve()
{
	std::lock_guard lock(mu_);
	return ++reserved_;
}

void StreamSignal::order(const c10::Stream &stream, uint64_t value)
{
	uint64_t id;
	{
		std::lock_guard lock(mu_);
		id = queue_id_; // a failed queue's id still names it: the wait faults at once
	}
	StreamQueues &sq = stream_queues(stream);
	neuron_event ev{id, value};
	std::lock_guard lock(sq.mu);
	adaptive_flush_locked(sq); // the wait follows the work issued before it
	const neuron_status s = neuron_queue_wait_event(sq.core, &ev);
	if (s != NEURON_OK)
		stream_failed(sq, s, "ordering the stream after a collective");
	// The stream's DMA work waits for its core work, so it is ordered too.
}

void StreamSignal::signal()
{
	std::lock_guard lock(mu_);
	if (!queue_)
		return;
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_NOP, 0);
	const neuron_status s = neuron_submit(queue_, &cmd, nullptr);
	TORCH_CHECK(s == NEURON_OK, "neuron backend: signalling a finished collective failed: ", neuron_last_error());
}

void StreamSignal::fail(const std::string &why)
{
	std::lock_guard lock(mu_);
	if (!queue_)
		return;
	explain_failed_queue(queue_id_, why);
	neuron_queue_destroy(queue_);
	queue_ = nullptr;
}

} // namespace torch_neuron::dist
