#include "queue.h"

#include <cerrno>
#include <cstring>
#include <system_error>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::backend {

Queue::Queue(uint64_t id, QueueKind kind, uint32_t device, uint32_t core, uint32_t slot_count,
	     std::shared_ptr<TenantContext> tenant, std::shared_ptr<QueueDirectory> peers)
	: id_(id), kind_(kind), device_(device), core_(core), slot_count_(slot_count),
	  tenant_(std::move(tenant)), peers_(std::move(peers))
{
	ring_bytes_ = ring::bytes_for(slot_count);
	memfd_ = memfd_create("neuron-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd_ < 0)
		throw std::system_error(errno, std::generic_category(), "memfd_create for a queue ring");
	if (ftruncate(memfd_, static_cast<off_t>(ring_bytes_)) != 0) {
		int e = errno;
		close(memfd_);
		throw std::system_error(e, std::generic_category(), "sizing a queue ring");
	}
	// Sealed so the tenant cannot shrink the ring under the daemon (a SIGBUS here).
	if (fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		int e = errno;
		close(memfd_);
		throw std::system_error(e, std::generic_category(), "sealing a queue ring");
	}
	void *p = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		close(memfd_);
		throw std::system_error(e, std::generic_category(), "mapping a queue ring");
	}
	ring_ = ring::Consumer(p, slot_count);
	ring_.init(id);
}

Queue::~Queue()
{
	munmap(ring_.header(), ring_bytes_);
	close(memfd_);
}

std::shared_ptr<Queue> Queue::blocking_peer() const
{
	const uint64_t seq = next_seq();
	if (ring_.tail() < seq)
		return nullptr;
	const neuron_wait w = ring_.peek_wait(seq);
	const uint64_t id = w.queue_id, value = w.value;
	if (id == 0 || id == id_)
		return nullptr;
	std::shared_ptr<Queue> peer = peers_->find(id);
	if (!peer || peer->completed() >= value || peer->faulted() || peer->retired())
		return nullptr; // may start, or start_command faults it
	return peer;
}

void Queue::complete(uint32_t slots)
{
	const uint64_t done = completed_.fetch_add(slots, std::memory_order_acq_rel) + slots;
	ring_.publish_completed(done);
}

void Queue::fault(uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
{
	ring_.publish_fault(code, seq, user_tag, reason);
	faulted_.store(true, std::memory_order_release);
}

} // namespace neuron::backend
