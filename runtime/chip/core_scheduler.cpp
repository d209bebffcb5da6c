#include "core_scheduler.h"

#include <neuron/futex.h>

#include <algorithm>

namespace neuron::chip {

using detail::monotonic_ns;

const char *lease_state_name(LeaseState s)
{
	switch (s) {
	case LeaseState::Owned: return "owned";
	case LeaseState::Lent: return "lent";
	case LeaseState::Reclaiming: return "reclaiming";
	}
	return "unknown";
}

static Pool other(Pool p) { return p == Pool::Inference ? Pool::Training : Pool::Inference; }

CoreScheduler::CoreScheduler(uint32_t device, uint32_t cores, uint32_t inference_cores, bool pooled)
	: device_(device), cores_(cores), pooled_(pooled)
{
	const uint64_t now = monotonic_ns();
	for (uint32_t c = 0; c < cores; ++c) {
		CoreLease l;
		l.home = l.holder = c < inference_cores ? Pool::Inference : Pool::Training;
		l.since_ns = now;
		leases_.push_back(l);
		slots_.push_back(std::make_unique<Slot>());
	}
}

void CoreScheduler::bump_locked() { generation_.fetch_add(1, std::memory_order_acq_rel); }

void CoreScheduler::wake(uint32_t core)
{
	detail::atomic_u32(slots_[core]->wake_word).fetch_add(1, std::memory_order_seq_cst);
	detail::futex_wake_all(&slots_[core]->wake_word);
}

void CoreScheduler::wake_all()
{
	for (uint32_t c = 0; c < cores_; ++c)
		wake(c);
}

std::shared_ptr<LogicalCore> CoreScheduler::attach(uint64_t tenant, uint32_t index, Pool pool, uint32_t weight)
{
	std::lock_guard lock(mutex_);
	for (const auto &l : logical_)
		if (l->tenant() == tenant && l->index() == index)
			return l;
	auto l = std::make_shared<LogicalCore>(tenant, device_, index, pool, weight);
	// A newcomer starts at its class's current virtual time, not at zero: fair share
	// from now on, no credit for the past.
	l->vtime.store(clock_[static_cast<int>(pool)].load(std::memory_order_relaxed));
	logical_.push_back(l);
	bump_locked();
	return l;
}

void CoreScheduler::add_queue(LogicalCore &l, std::shared_ptr<Queue> q)
{
	l.add_queue(std::move(q));
	{
		std::lock_guard lock(mutex_);
		bump_locked(); // engines re-read which doorbells to sleep on
	}
	wake_all();
}

void CoreScheduler::remove_queue(LogicalCore &l, const Queue *q)
{
	l.remove_queue(q);
	{
		std::lock_guard lock(mutex_);
		if (l.queue_count() == 0)
			std::erase_if(logical_, [&](const auto &p) { return p.get() == &l; });
		bump_locked();
	}
	wake_all();
}

std::vector<CoreLease> CoreScheduler::leases() const
{
	std::lock_guard lock(mutex_);
	return leases_;
}

std::vector<std::shared_ptr<LogicalCore>> CoreScheduler::logical_cores() const
{
	std::lock_guard lock(mutex_);
	return logical_;
}

uint32_t CoreScheduler::held(Pool pool) const
{
	std::lock_guard lock(mutex_);
	return static_cast<uint32_t>(std::count_if(leases_.begin(), leases_.end(), [&](const CoreLease &l) { return l.holder == pool; }));
}

uint32_t CoreScheduler::homed(Pool pool) const
{
	std::lock_guard lock(mutex_);
	return static_cast<uint32_t>(std::count_if(leases_.begin(), leases_.end(), [&](const CoreLease &l) { return l.home == pool; }));
}

std::string CoreScheduler::lend(uint32_t core)
{
	if (core >= cores_)
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device_);
	{
		std::lock_guard lock(mutex_);
		CoreLease &l = leases_[core];
		if (l.state != LeaseState::Owned)
			return "core " + std::to_string(core) + " of device " + std::to_string(device_) + " is " +
			       lease_state_name(l.state) + ", not owned by its home pool";
		l.holder = other(l.home);
		l.state = LeaseState::Lent;
		l.since_ns = monotonic_ns();
		bump_locked();
	}
	wake_all();
	return {};
}

std::string CoreScheduler::begin_reclaim(uint32_t core, uint64_t deadline_ns)
{
	if (core >= cores_)
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device_);
	{
		std::lock_guard lock(mutex_);
		CoreLease &l = leases_[core];
		if (l.state != LeaseState::Lent)
			return "core " + std::to_string(core) + " of device " + std::to_string(device_) + " is " +
			       lease_state_name(l.state) + ", not lent";
		l.holder = l.home;
		l.state = LeaseState::Reclaiming;
		l.reclaim_start_ns = monotonic_ns();
		l.reclaim_deadline_ns = deadline_ns;
		bump_locked();
		// After the generation: an engine that sees the flag re-reads its set first.
		slots_[core]->reclaim_pending.store(true, std::memory_order_seq_cst);
	}
	wake(core);
	return {};
}

bool CoreScheduler::wait_reclaimed(uint32_t core, uint64_t deadline_ns)
{
	std::unique_lock lock(mutex_);
	for (;;) {
		if (leases_[core].state != LeaseState::Reclaiming)
			return true;
		const uint64_t now = monotonic_ns();
		if (now >= deadline_ns)
			return false;
		reclaimed_.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
	}
}

void CoreScheduler::complete_reclaim(uint32_t core)
{
	ReclaimDone done;
	{
		std::lock_guard lock(mutex_);
		if (!slots_[core]->reclaim_pending.exchange(false))
			return;
		CoreLease &l = leases_[core];
		if (l.state != LeaseState::Reclaiming)
			return;
		const uint64_t now = monotonic_ns();
		done.device = device_;
		done.core = core;
		done.lender = l.home;
		done.borrower = other(l.home);
		done.latency_ns = now - l.reclaim_start_ns;
		done.late = now > l.reclaim_deadline_ns;
		l.state = LeaseState::Owned;
		l.last_reclaim_ns = done.latency_ns;
		l.since_ns = now;
	}
	reclaimed_.notify_all();
	if (on_reclaimed)
		on_reclaimed(done);
}

bool CoreScheduler::pool_present_locked(Pool p) const
{
	for (const auto &l : leases_)
		if (l.home == p || l.holder == p)
			return true;
	return false;
}

void CoreScheduler::eligible(uint32_t core, std::vector<std::shared_ptr<LogicalCore>> *out, uint64_t *gen) const
{
	std::lock_guard lock(mutex_);
	*gen = generation_.load(std::memory_order_acquire);
	out->clear();
	const CoreLease &me = leases_[core];
	const bool present[kPoolCount] = {pool_present_locked(Pool::Inference), pool_present_locked(Pool::Training)};
	for (const auto &l : logical_) {
		const Pool p = l->pool();
		if (!pooled_ || p == me.home || p == me.holder || !present[static_cast<int>(p)])
			out->push_back(l);
	}
}

} // namespace neuron::chip
