// Queues: the tenant side of the shared ring (submit, wait, faults, events).
#include "internal.h"


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>
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

namespace {

// Publishes a command of `count` slots (1, or an EXEC_PROGRAM with its bindings)
// at once, written by write(first_seq); *seq_out receives its last slot's number.
template <class Write> neuron_status publish(neuron_queue *q, uint32_t count, uint64_t *seq_out, Write write)
{
	std::lock_guard lock(q->submit_mutex);
	if (q->ring.fault_code() != NEURON_FAULT_NONE)
		return fault_status(q);
	const uint64_t first = q->submitted + 1, last = first + count - 1;
	// A slot is free once the command slot_count places earlier completed. On a
	// full ring, wait until a quarter of it has drained rather than for the one
	// slot: a producer ahead of the device would otherwise sleep and be woken
	// after every completion (a futex wake-up on the engine's path per command:
	// ~10% of neurond's time in a transformer step whose host ran ahead), while
	// the device still has three quarters of the ring queued.
	if (!q->ring.has_room(last)) {
		const uint64_t target = std::min(last - q->slot_count + q->slot_count / 4, q->submitted);
		if (neuron_status s = wait_completed(q, target, -1); s != NEURON_OK)
			return s;
	}
	write(first);
	atomic_u64(q->submitted).store(last, std::memory_order_release);
	if (seq_out)
		*seq_out = last;
	return NEURON_OK;
}

} // namespace

extern "C" neuron_status neuron_submit(neuron_queue *q, const struct neuron_cmd *cmd, uint64_t *seq_out)
{
	if (!q || !cmd)
		return fail(NEURON_ERR_INVALID, "neuron_submit: queue and command must not be NULL");
	return publish(q, 1, seq_out, [&](uint64_t seq) { q->ring.publish(seq, *cmd); });
}

extern "C" neuron_status neuron_submit_program(neuron_queue *q, uint64_t program, const uint64_t *bindings,
					       uint32_t count, const struct neuron_exec_options *opts, uint64_t *seq_out)
{
	if (!q || (count && !bindings))
		return fail(NEURON_ERR_INVALID, "neuron_submit_program: queue and bindings must not be NULL");
	if (q->kind != NEURON_QUEUE_CORE)
		return fail(NEURON_ERR_INVALID, "neuron_submit_program: programs run on core queues, not DMA queues");
	const uint32_t slots = neuron_exec_slots(count);
	if (slots > q->slot_count)
		return fail(NEURON_ERR_INVALID, "neuron_submit_program: " + std::to_string(count) + " bindings take " +
							std::to_string(slots) + " ring slots; queue " + std::to_string(q->id) +
							" has " + std::to_string(q->slot_count));
	// Thread-local staging: a replay is on the hot path (no allocation once warm).
	thread_local std::vector<std::byte> buf;
	buf.assign(size_t(slots) * NEURON_CMD_SLOT_SIZE, std::byte{0});
	auto *head = reinterpret_cast<neuron_exec_slot *>(buf.data());
	head->opcode = NEURON_OP_EXEC_PROGRAM;
	head->program = program;
	head->binding_count = count;
	if (opts) {
		head->user_tag = opts->user_tag;
		head->wait = opts->wait;
		head->flags = static_cast<uint8_t>(opts->flags);
		head->rng_seed = opts->rng_seed;
		head->rng_offset = opts->rng_offset;
	}
	const uint32_t inline_n = std::min<uint32_t>(count, NEURON_EXEC_INLINE_BINDINGS);
	std::memcpy(head->bindings, bindings, inline_n * sizeof(uint64_t));
	if (count > inline_n)
		std::memcpy(buf.data() + NEURON_CMD_SLOT_SIZE, bindings + inline_n, (count - inline_n) * sizeof(uint64_t));
	return publish(q, slots, seq_out, [&](uint64_t first) { q->ring.publish_slots(first, buf.data(), slots); });
}

extern "C" uint32_t neuron_queue_features(const neuron_queue *q)
{
	return q ? q->ring.features() : 0;
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
