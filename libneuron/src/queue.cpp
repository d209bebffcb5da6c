// Queues: the tenant side of the shared ring (submit, wait, faults, events).
#include "internal.h"


#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;
using neuron::detail::atomic_u64;

namespace {

// How long a waiter polls before it sleeps: a futex wake-up costs ~30 us on these
// machines while most device commands finish sooner.
constexpr uint64_t kSpinNs = 20000;
// Sleeping waiters check this often that the daemon is still there.
constexpr int64_t kLivenessSliceNs = 50'000'000;

neuron_status fault_status(const neuron_queue *q)
{
	const neuron_ring_header *h = q->ring.header();
	return fail(NEURON_ERR_FAULT, "queue " + std::to_string(q->id) + " faulted at command " +
					      std::to_string(h->fault_seq) + " (code " + std::to_string(q->ring.fault_code()) +
					      "): " + std::string(h->fault_reason, strnlen(h->fault_reason, NEURON_FAULT_REASON_LEN)));
}

// Waits until completed >= target; the common path of wait and of a full ring.
neuron_status wait_completed(neuron_queue *q, uint64_t target, int64_t timeout_ns)
{
	using Wait = ring::Producer::Wait;
	switch (q->ring.wait(target, timeout_ns, kSpinNs, kLivenessSliceNs,
			     [&] { return !client::daemon_gone(q->client); })) {
	case Wait::Reached: return NEURON_OK;
	case Wait::Faulted: return fault_status(q);
	case Wait::TimedOut:
		return fail(NEURON_ERR_TIMEOUT, "queue " + std::to_string(q->id) + ": command " + std::to_string(target) +
							 " did not complete in time (" + std::to_string(q->ring.completed()) +
							 " completed)");
	case Wait::Abandoned:
		break;
	}
	return fail(NEURON_ERR_DAEMON_LOST,
		    "neurond went away while waiting on queue " + std::to_string(q->id) + "; its work is lost");
}

} // namespace

extern "C" neuron_status neuron_queue_create(neuron_client *c, uint32_t device, int kind, uint32_t core,
					     uint32_t slot_count, neuron_queue **out)
{
	if (!c || !out)
		return fail(NEURON_ERR_INVALID, "neuron_queue_create: client and out must not be NULL");
	if (kind != NEURON_QUEUE_CORE && kind != NEURON_QUEUE_DMA)
		return fail(NEURON_ERR_INVALID, "queue kind " + std::to_string(kind) + " is not NEURON_QUEUE_CORE or NEURON_QUEUE_DMA");
	api::Request req;
	auto *cq = req.mutable_create_queue();
	cq->set_device(device);
	cq->set_kind(kind == NEURON_QUEUE_DMA ? api::QUEUE_KIND_DMA : api::QUEUE_KIND_CORE);
	cq->set_core(core);
	cq->set_slot_count(slot_count);
	api::Response resp;
	int fd = -1;
	if (neuron_status s = call(c, req, &resp, -1, &fd); s != NEURON_OK)
		return s;
	const auto &r = resp.create_queue();
	if (fd < 0)
		return fail(NEURON_ERR_PROTOCOL, "neurond created queue " + std::to_string(r.queue_id()) +
							 " but passed no ring descriptor");
	void *p = mmap(nullptr, r.ring_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return fail(NEURON_ERR_NO_MEMORY, std::string("cannot map the queue ring: ") + std::strerror(errno));
	auto *q = new neuron_queue;
	q->client = c;
	q->id = r.queue_id();
	q->device = device;
	q->kind = kind;
	q->slot_count = r.slot_count();
	q->ring_bytes = r.ring_bytes();
	if (auto why = ring::Producer::check(p, q->ring_bytes, q->slot_count); !why.empty()) {
		munmap(p, q->ring_bytes);
		delete q;
		return fail(NEURON_ERR_PROTOCOL, "the queue ring from neurond is unusable: " + why);
	}
	q->ring = ring::Producer(p, q->slot_count);
	*out = q;
	return NEURON_OK;
}

extern "C" neuron_status neuron_queue_destroy(neuron_queue *q)
{
	if (!q)
		return NEURON_OK;
	api::Request req;
	req.mutable_destroy_queue()->set_queue_id(q->id);
	api::Response resp;
	neuron_status s = client::daemon_gone(q->client) ? NEURON_OK : call(q->client, req, &resp);
	munmap(q->ring.header(), q->ring_bytes);
	delete q;
	return s;
}

extern "C" uint64_t neuron_queue_id(const neuron_queue *q) { return q ? q->id : 0; }

extern "C" neuron_status neuron_submit(neuron_queue *q, const struct neuron_cmd *cmd, uint64_t *seq_out)
{
	if (!q || !cmd)
		return fail(NEURON_ERR_INVALID, "neuron_submit: queue and command must not be NULL");
	std::lock_guard lock(q->submit_mutex);
	if (q->ring.fault_code() != NEURON_FAULT_NONE)
		return fault_status(q);
	const uint64_t seq = q->submitted + 1;
	// The slot is free once the command slot_count places earlier completed.
	if (!q->ring.has_room(seq))
		if (neuron_status s = wait_completed(q, seq - q->slot_count, -1); s != NEURON_OK)
			return s;
	q->ring.publish(seq, *cmd);
	atomic_u64(q->submitted).store(seq, std::memory_order_release);
	if (seq_out)
		*seq_out = seq;
	return NEURON_OK;
}

extern "C" uint64_t neuron_queue_completed(const neuron_queue *q)
{
	return q ? q->ring.completed() : 0;
}

extern "C" neuron_status neuron_queue_wait(neuron_queue *q, uint64_t seq, int64_t timeout_ns)
{
	if (!q)
		return fail(NEURON_ERR_INVALID, "neuron_queue_wait: queue is NULL");
	const uint64_t submitted = atomic_u64(q->submitted).load(std::memory_order_acquire);
	if (seq > submitted)
		return fail(NEURON_ERR_INVALID, "queue " + std::to_string(q->id) + ": command " + std::to_string(seq) +
							" was never submitted (" + std::to_string(submitted) + " so far)");
	return wait_completed(q, seq, timeout_ns);
}

extern "C" neuron_status neuron_queue_sync(neuron_queue *q, int64_t timeout_ns)
{
	if (!q)
		return fail(NEURON_ERR_INVALID, "neuron_queue_sync: queue is NULL");
	return wait_completed(q, atomic_u64(q->submitted).load(std::memory_order_acquire), timeout_ns);
}

extern "C" neuron_status neuron_queue_fault(const neuron_queue *q, struct neuron_fault *f)
{
	if (!q || !f)
		return fail(NEURON_ERR_INVALID, "neuron_queue_fault: arguments must not be NULL");
	const neuron_ring_header *h = q->ring.header();
	*f = {};
	f->code = q->ring.fault_code();
	if (f->code != NEURON_FAULT_NONE) {
		f->seq = h->fault_seq;
		f->user_tag = h->fault_user_tag;
		std::memcpy(f->reason, h->fault_reason, NEURON_FAULT_REASON_LEN);
		f->reason[NEURON_FAULT_REASON_LEN - 1] = '\0';
	}
	return NEURON_OK;
}

extern "C" neuron_status neuron_event_record(neuron_queue *q, struct neuron_event *ev)
{
	if (!q || !ev)
		return fail(NEURON_ERR_INVALID, "neuron_event_record: arguments must not be NULL");
	ev->queue_id = q->id;
	ev->value = atomic_u64(q->submitted).load(std::memory_order_acquire);
	return NEURON_OK;
}

extern "C" neuron_status neuron_queue_wait_event(neuron_queue *q, const struct neuron_event *ev)
{
	if (!q || !ev)
		return fail(NEURON_ERR_INVALID, "neuron_queue_wait_event: arguments must not be NULL");
	if (ev->value == 0)
		return NEURON_OK; // recorded before any work: nothing to wait for
	struct neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_NOP, 0);
	cmd.wait.queue_id = ev->queue_id;
	cmd.wait.value = ev->value;
	return neuron_submit(q, &cmd, nullptr);
}

extern "C" neuron_status neuron_event_wait(neuron_queue *q, const struct neuron_event *ev, int64_t timeout_ns)
{
	if (!q || !ev)
		return fail(NEURON_ERR_INVALID, "neuron_event_wait: arguments must not be NULL");
	if (ev->queue_id != q->id)
		return fail(NEURON_ERR_INVALID, "event was recorded on queue " + std::to_string(ev->queue_id) +
							", not on queue " + std::to_string(q->id));
	return ev->value == 0 ? NEURON_OK : wait_completed(q, ev->value, timeout_ns);
}
