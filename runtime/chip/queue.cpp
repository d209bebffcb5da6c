#include "queue.h"

#include <neuron/detail/futex.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::chip {

using detail::atomic_u32;
using detail::atomic_u64;

Queue::Queue(uint64_t id, QueueKind kind, uint32_t device, uint32_t core, uint32_t slot_count,
	     std::shared_ptr<TenantMemory> memory, std::shared_ptr<QueueDirectory> peers)
	: id_(id), kind_(kind), device_(device), core_(core), slot_count_(slot_count),
	  memory_(std::move(memory)), peers_(std::move(peers))
{
	ring_bytes_ = NEURON_RING_HEADER_SIZE + uint64_t(slot_count) * NEURON_CMD_SLOT_SIZE;
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
	header_ = static_cast<neuron_ring_header *>(p);
	header_->magic = NEURON_RING_MAGIC;
	header_->abi_major = NEURON_CMD_ABI_MAJOR;
	header_->slot_count = slot_count;
	header_->slot_size = NEURON_CMD_SLOT_SIZE;
	header_->queue_id = id;
}

Queue::~Queue()
{
	munmap(header_, ring_bytes_);
	close(memfd_);
}

const std::byte *Queue::slot(uint64_t seq) const
{
	const auto *base = reinterpret_cast<const std::byte *>(header_) + NEURON_RING_HEADER_SIZE;
	return base + ((seq - 1) & (slot_count_ - 1)) * NEURON_CMD_SLOT_SIZE;
}

std::shared_ptr<Queue> Queue::blocking_peer() const
{
	const uint64_t seq = next_seq();
	if (atomic_u64(header_->tail).load(std::memory_order_acquire) < seq)
		return nullptr;
	auto *cmd = reinterpret_cast<neuron_cmd *>(const_cast<std::byte *>(slot(seq)));
	const uint64_t id = atomic_u64(cmd->wait.queue_id).load(std::memory_order_relaxed);
	const uint64_t value = atomic_u64(cmd->wait.value).load(std::memory_order_relaxed);
	if (id == 0 || id == id_)
		return nullptr;
	std::shared_ptr<Queue> peer = peers_->find(id);
	if (!peer || peer->completed() >= value || peer->faulted() || peer->retired())
		return nullptr; // may start, or start_command faults it
	return peer;
}

void Queue::wake_waiters()
{
	atomic_u32(header_->completed_futex).fetch_add(1, std::memory_order_seq_cst);
	if (atomic_u32(header_->waiters).load(std::memory_order_seq_cst) != 0)
		detail::futex_wake_all(&header_->completed_futex);
}

void Queue::complete_one()
{
	const uint64_t done = completed_.fetch_add(1, std::memory_order_acq_rel) + 1;
	atomic_u64(header_->completed).store(done, std::memory_order_release);
	wake_waiters();
}

void Queue::fault(uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
{
	header_->fault_seq = seq;
	header_->fault_user_tag = user_tag;
	const size_t n = std::min(reason.size(), size_t(NEURON_FAULT_REASON_LEN - 1));
	std::memcpy(header_->fault_reason, reason.data(), n);
	header_->fault_reason[n] = '\0';
	atomic_u32(header_->fault_code).store(code, std::memory_order_release);
	faulted_.store(true, std::memory_order_release);
	wake_waiters();
}

} // namespace neuron::chip
