#include "queue.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>
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

Queue::Queue(uint64_t id, QueueKind kind, uint32_t device, uint32_t core, uint32_t slot_count, int ring_fd,
	     QueueProgress *progress, int undo_fd, std::shared_ptr<TenantContext> tenant,
	     std::shared_ptr<QueueDirectory> peers)
	: id_(id), kind_(kind), device_(device), core_(core), slot_count_(slot_count), memfd_(ring_fd),
	  tenant_(std::move(tenant)), peers_(std::move(peers))
{
	ring_bytes_ = ring::bytes_for(slot_count);
	undo_ = std::make_unique<UndoLog>(undo_fd);
	struct stat st;
	const int seals = fcntl(memfd_, F_GET_SEALS);
	if (fstat(memfd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != ring_bytes_ || seals < 0 ||
	    !(seals & F_SEAL_SHRINK)) {
		close(memfd_);
		throw std::runtime_error("the kept ring of queue " + std::to_string(id) + " is not a sealed ring of " +
					 std::to_string(slot_count) + " slots");
	}
	void *p = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
	if (p == MAP_FAILED) {
		const int e = errno;
		close(memfd_);
		throw std::system_error(e, std::generic_category(), "mapping a kept queue ring");
	}
	ring_ = ring::Consumer(p, slot_count);
	const neuron_ring_header *h = ring_.header();
	if (h->magic != NEURON_RING_MAGIC || h->slot_count != slot_count || h->queue_id != id) {
		munmap(p, ring_bytes_);
		close(memfd_);
		throw std::runtime_error("the kept ring of queue " + std::to_string(id) + " has another header");
	}
	progress_ = progress;
	const uint64_t done = progress->completed;
	completed_.store(done, std::memory_order_relaxed);
	faulted_.store(progress->faulted != 0 || ring_.fault_code() != NEURON_FAULT_NONE, std::memory_order_relaxed);
	if (progress->started > done)
		interrupted_ = progress->started;
	ring_.offer_features();
	// The earlier neurond's engines died announced as sleeping: nobody sleeps now.
	std::atomic_ref<uint32_t>(ring_.header()->engine_sleeping).store(0, std::memory_order_relaxed);
	ring_.publish_completed(done); // it may have died between the two stores
}

void Queue::keep(QueueProgress *progress, int undo_fd, std::function<void()> released)
{
	released_ = std::move(released);
	progress_ = progress;
	undo_ = std::make_unique<UndoLog>(undo_fd);
	if (progress_)
		*progress_ = QueueProgress{id_, completed(), 0, faulted() ? 1u : 0u, 0, {}};
}

Queue::~Queue()
{
	if (released_)
		released_();
	munmap(ring_.header(), ring_bytes_);
	close(memfd_);
}

std::shared_ptr<Queue> Queue::blocking_peer(uint64_t *value_out) const
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
	if (value_out)
		*value_out = value;
	return peer;
}

void Queue::complete(uint32_t slots)
{
	const uint64_t done = completed_.fetch_add(slots, std::memory_order_acq_rel) + slots;
	// Kept first: a restart between the two stores must not run the command again.
	if (progress_)
		std::atomic_ref<uint64_t>(progress_->completed).store(done, std::memory_order_release);
	ring_.publish_completed(done);
}

void Queue::fault(uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
{
	if (progress_)
		std::atomic_ref<uint32_t>(progress_->faulted).store(1, std::memory_order_release);
	ring_.publish_fault(code, seq, user_tag, reason);
	faulted_.store(true, std::memory_order_release);
}

} // namespace neuron::backend
