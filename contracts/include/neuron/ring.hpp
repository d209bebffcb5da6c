// The one implementation of a queue ring's protocol (<neuron/ring.h>): the
// producer side (libneuron, a tenant) and the consumer side (neurond, whatever
// device backend serves the queue), the doorbell and the sleep announcements.
//
// Neither side trusts the other: every shared word is read with an atomic, a
// slot is copied out before it is looked at, and the consumer keeps its own
// `completed` (the shared one is a report). Both classes are views over a
// mapping someone else owns; they hold no locks. Producer is single-threaded per
// ring (libneuron serialises submitters); Consumer is used by the one daemon
// thread that runs the queue at a time, while any daemon thread may read tail(),
// completed() and the sleep words.
#pragma once

#include <neuron/futex.h>
#include <neuron/ring.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace neuron::ring {

using detail::atomic_u32;
using detail::atomic_u64;

// Ring sizes a queue may have: a power of two in [2, 65536] slots.
inline constexpr uint32_t kMinSlots = 2;
inline constexpr uint32_t kMaxSlots = 65536;
inline bool valid_slot_count(uint32_t n) { return n >= kMinSlots && n <= kMaxSlots && (n & (n - 1)) == 0; }
inline uint64_t bytes_for(uint32_t slot_count) { return NEURON_RING_HEADER_SIZE + uint64_t(slot_count) * NEURON_CMD_SLOT_SIZE; }

class View {
public:
	View() = default;
	// base: the mapping (header first, then the slots); slot_count: the owner's
	// own value, never the shared header's.
	View(void *base, uint32_t slot_count)
		: h_(static_cast<neuron_ring_header *>(base)), slot_count_(slot_count)
	{
	}

	neuron_ring_header *header() const { return h_; }
	uint32_t slot_count() const { return slot_count_; }
	std::byte *slot(uint64_t seq) const
	{
		return reinterpret_cast<std::byte *>(h_) + NEURON_RING_HEADER_SIZE +
		       ((seq - 1) & (slot_count_ - 1)) * NEURON_CMD_SLOT_SIZE;
	}
	// The consumer's report of completed commands.
	uint64_t completed() const { return atomic_u64(h_->completed).load(std::memory_order_acquire); }
	uint32_t fault_code() const { return atomic_u32(h_->fault_code).load(std::memory_order_acquire); }
	// The word the consumer bumps after every completion and fault.
	uint32_t *completed_word() const { return &h_->completed_futex; }

	// A targeted sleeper's registration (ring.h, "Targeted waits"): lowers
	// wake_at to `target`, then returns the word to sleep on. Sleep on it only
	// while target_registered(target) still holds after this returned (a wake-up
	// for an earlier target can reset wake_at in between); the caller counted
	// itself in target_waiters first.
	uint32_t register_target(uint64_t target) const
	{
		auto at = atomic_u64(h_->wake_at);
		uint64_t cur = at.load(std::memory_order_seq_cst);
		while (target < cur && !at.compare_exchange_weak(cur, target, std::memory_order_seq_cst))
			;
		return atomic_u32(h_->completed_futex).load(std::memory_order_seq_cst);
	}
	bool target_registered(uint64_t target) const
	{
		return atomic_u64(h_->wake_at).load(std::memory_order_seq_cst) <= target;
	}
	// NEURON_RING_F_*: what the daemon that runs the ring offers (a daemon that
	// adopts the ring after a restart writes its own).
	uint32_t features() const { return atomic_u32(h_->features).load(std::memory_order_relaxed); }
	bool has_targeted_waits() const { return (features() & NEURON_RING_F_WAKE_AT) != 0; }

protected:
	neuron_ring_header *h_ = nullptr;
	uint32_t slot_count_ = 0;
};

// The tenant's side.
class Producer : public View {
public:
	using View::View;

	// Checks a ring the daemon handed over: "" or what is wrong with it.
	static std::string check(const void *base, uint64_t mapped_bytes, uint32_t slot_count)
	{
		const auto *h = static_cast<const neuron_ring_header *>(base);
		if (!valid_slot_count(slot_count) || mapped_bytes < bytes_for(slot_count))
			return "the ring is smaller than its " + std::to_string(slot_count) + " slots";
		if (h->magic != NEURON_RING_MAGIC || h->abi_major != NEURON_CMD_ABI_MAJOR || h->slot_count != slot_count ||
		    h->slot_size != NEURON_CMD_SLOT_SIZE)
			return "the ring header does not match this library (magic, ABI major or slot geometry)";
		return {};
	}

	// A fault that makes command `seq` unreachable.
	bool faulted_at_or_before(uint64_t seq) const
	{
		return fault_code() != NEURON_FAULT_NONE && h_->fault_seq <= seq;
	}
	// True once the slot of command `seq` may be written (its previous occupant,
	// seq - slot_count, completed).
	bool has_room(uint64_t seq) const { return seq <= slot_count_ || completed() >= seq - slot_count_; }
	// Writes command `seq` (the one after the last published) and publishes it;
	// rings the doorbell if a consumer announced that it sleeps. The caller made
	// sure has_room(seq).
	void publish(uint64_t seq, const neuron_cmd &cmd)
	{
		std::memcpy(slot(seq), &cmd, sizeof(cmd));
		publish_tail(seq);
	}
	// Writes `count` whole slots from `slots` as commands first..first+count-1 and
	// publishes them with one tail store (a command that spans several slots must
	// be published at once: EXEC_PROGRAM, <neuron/program.h>). The caller made
	// sure has_room(first + count - 1).
	void publish_slots(uint64_t first, const void *slots, uint32_t count)
	{
		const auto *src = static_cast<const std::byte *>(slots);
		for (uint32_t i = 0; i < count; ++i)
			std::memcpy(slot(first + i), src + size_t(i) * NEURON_CMD_SLOT_SIZE, NEURON_CMD_SLOT_SIZE);
		publish_tail(first + count - 1);
	}

	enum class Wait { Reached, Faulted, TimedOut, Abandoned };

private:
	void publish_tail(uint64_t seq)
	{
		// seq_cst on both words: a Dekker pair with the consumer's announce_sleep(),
		// so either it sees the new tail or this sees its announcement.
		atomic_u64(h_->tail).store(seq, std::memory_order_seq_cst);
		if (atomic_u32(h_->engine_sleeping).load(std::memory_order_seq_cst)) {
			atomic_u32(h_->doorbell).fetch_add(1, std::memory_order_seq_cst);
			detail::futex_wake_all(&h_->doorbell);
		}
	}

public:
	// Waits until completed() >= target: polls for spin_ns (a futex wake-up costs
	// tens of microseconds in these VMs, most commands finish sooner), then sleeps
	// announced as a targeted waiter (or, with a daemon that does not offer
	// targeted waits, in `waiters`: woken at every completion), in slices of at
	// most slice_ns; after a slice that timed out, still_there() decides whether to
	// go on (false: Abandoned). timeout_ns < 0: no timeout.
	template <class StillThere>
	Wait wait(uint64_t target, int64_t timeout_ns, uint64_t spin_ns, int64_t slice_ns, StillThere still_there) const
	{
		const uint64_t start = detail::monotonic_ns();
		while (detail::monotonic_ns() - start < spin_ns) {
			if (completed() >= target)
				return Wait::Reached;
			if (faulted_at_or_before(target))
				return Wait::Faulted;
			detail::spin_pause();
		}
		const bool targeted = has_targeted_waits();
		auto count = atomic_u32(targeted ? h_->target_waiters : h_->waiters);
		count.fetch_add(1, std::memory_order_seq_cst);
		Wait result;
		for (;;) {
			// Reached already (the usual case after a wake-up): leave without
			// registering again, which would leave a stale target behind.
			if (completed() >= target) {
				result = Wait::Reached;
				break;
			}
			const uint32_t word = targeted ? register_target(target)
						       : atomic_u32(h_->completed_futex).load(std::memory_order_seq_cst);
			// seq_cst: after the registration above (a Dekker pair with wake_sleepers).
			if (atomic_u64(h_->completed).load(std::memory_order_seq_cst) >= target) {
				result = Wait::Reached;
				break;
			}
			if (faulted_at_or_before(target)) {
				result = Wait::Faulted;
				break;
			}
			if (targeted && !target_registered(target))
				continue; // reset by a wake-up for an earlier target: register again
			int64_t slice = slice_ns;
			if (timeout_ns >= 0) {
				const int64_t left = timeout_ns - static_cast<int64_t>(detail::monotonic_ns() - start);
				if (left <= 0) {
					result = Wait::TimedOut;
					break;
				}
				slice = std::min(slice, left);
			}
			struct timespec ts = {static_cast<time_t>(slice / 1000000000), static_cast<long>(slice % 1000000000)};
			if (detail::futex_wait(&h_->completed_futex, word, &ts) != 0 && errno == ETIMEDOUT && !still_there()) {
				result = Wait::Abandoned;
				break;
			}
		}
		count.fetch_sub(1, std::memory_order_seq_cst);
		return result;
	}
};

// The daemon's side.
class Consumer : public View {
public:
	using View::View;

	// Writes the header of a fresh ring (the mapping is zeroed).
	void init(uint64_t queue_id)
	{
		h_->magic = NEURON_RING_MAGIC;
		h_->abi_major = NEURON_CMD_ABI_MAJOR;
		h_->slot_count = slot_count_;
		h_->slot_size = NEURON_CMD_SLOT_SIZE;
		h_->queue_id = queue_id;
		h_->wake_at = UINT64_MAX;
		h_->features = NEURON_RING_FEATURES;
	}
	// A ring adopted after a restart: what this daemon offers from now on.
	void offer_features() { atomic_u32(h_->features).store(NEURON_RING_FEATURES, std::memory_order_relaxed); }

	// The tenant's published tail (untrusted: see overrun()).
	uint64_t tail() const { return atomic_u64(h_->tail).load(std::memory_order_acquire); }
	// True if the tenant published more than the ring holds past `completed`.
	bool overrun(uint64_t tail, uint64_t completed) const { return tail > completed && tail - completed > slot_count_; }
	// Commands published and not completed, clamped to what the ring can hold.
	uint64_t depth(uint64_t completed) const
	{
		const uint64_t t = tail();
		return t > completed ? std::min<uint64_t>(t - completed, slot_count_) : 0;
	}
	// A private copy of command `seq`: the tenant can still write the shared slot.
	void read(uint64_t seq, neuron_cmd *out) const { std::memcpy(out, slot(seq), sizeof(*out)); }
	// A private copy of bytes [offset, offset + n) of slot `seq` (a command that
	// spans several slots: EXEC_PROGRAM's bindings, <neuron/program.h>);
	// offset + n <= NEURON_CMD_SLOT_SIZE.
	void read_bytes(uint64_t seq, size_t offset, void *out, size_t n) const { std::memcpy(out, slot(seq) + offset, n); }
	// The wait field of command `seq`, read in place: a hint only (whoever runs
	// the command reads it again from its private copy).
	neuron_wait peek_wait(uint64_t seq) const
	{
		auto *cmd = reinterpret_cast<neuron_cmd *>(slot(seq));
		return {atomic_u64(cmd->wait.queue_id).load(std::memory_order_relaxed),
			atomic_u64(cmd->wait.value).load(std::memory_order_relaxed)};
	}

	// Reports `done` completed commands (the consumer's own count) and wakes
	// the producer's waiters and any consumer blocked on this ring.
	void publish_completed(uint64_t done)
	{
		atomic_u64(h_->completed).store(done, std::memory_order_seq_cst);
		wake_sleepers(done, false);
	}
	// The sticky fault of command `seq`: written once, then the same wake-up.
	void publish_fault(uint32_t code, uint64_t seq, uint64_t user_tag, const std::string &reason)
	{
		h_->fault_seq = seq;
		h_->fault_user_tag = user_tag;
		const size_t n = std::min(reason.size(), size_t(NEURON_FAULT_REASON_LEN - 1));
		std::memcpy(h_->fault_reason, reason.data(), n);
		h_->fault_reason[n] = '\0';
		atomic_u32(h_->fault_code).store(code, std::memory_order_seq_cst);
		wake_sleepers(0, true);
	}

	// Sleep protocol of a consumer thread that waits for new commands on this
	// ring: announce, then check tail() once more, then sleep on doorbell_word()
	// while it still holds the value announce_sleep() returned; withdraw after.
	// Several threads may announce on one ring (it is a count).
	uint32_t announce_sleep() const
	{
		atomic_u32(h_->engine_sleeping).fetch_add(1, std::memory_order_seq_cst);
		return atomic_u32(h_->doorbell).load(std::memory_order_seq_cst);
	}
	void withdraw_sleep() const { atomic_u32(h_->engine_sleeping).fetch_sub(1, std::memory_order_relaxed); }
	uint32_t *doorbell_word() const { return &h_->doorbell; }

	// The same for a consumer thread waiting until this ring has completed
	// `target` commands (a command of another queue waits on it): a targeted
	// sleeper (ring.h); sleep on completed_word() while target_registered(target)
	// holds after this returned, withdraw after.
	uint32_t announce_waiter(uint64_t target) const
	{
		atomic_u32(h_->target_waiters).fetch_add(1, std::memory_order_seq_cst);
		return register_target(target);
	}
	void withdraw_waiter() const { atomic_u32(h_->target_waiters).fetch_sub(1, std::memory_order_relaxed); }

	// Sleeps on this ring's doorbell for at most `slice` unless a command is
	// already published past `consumed` (one ring, one thread: the kmd pump's
	// idle wait).
	void sleep_for_commands(uint64_t consumed, const struct timespec &slice) const
	{
		const uint32_t bell = announce_sleep();
		if (tail() <= consumed)
			detail::futex_wait(&h_->doorbell, bell, &slice);
		withdraw_sleep();
	}

private:
	// After a completion (done) or a fault (everyone): bumps the word, and wakes
	// its sleepers if any waits for every completion, or a targeted one's target
	// is reached (wake_at back to none first: the woken register again; ring.h).
	// The loads after the seq_cst store of completed / fault_code pair with the
	// sleepers' registration before their check of them.
	void wake_sleepers(uint64_t done, bool everyone)
	{
		bool wake = atomic_u32(h_->waiters).load(std::memory_order_seq_cst) != 0;
		if (atomic_u32(h_->target_waiters).load(std::memory_order_seq_cst) != 0) {
			auto at = atomic_u64(h_->wake_at);
			if (everyone || done >= at.load(std::memory_order_seq_cst)) {
				at.exchange(UINT64_MAX, std::memory_order_seq_cst);
				wake = true;
			}
		}
		atomic_u32(h_->completed_futex).fetch_add(1, std::memory_order_seq_cst);
		if (wake)
			detail::futex_wake_all(&h_->completed_futex);
	}
};

} // namespace neuron::ring
