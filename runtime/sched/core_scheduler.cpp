#include "core_scheduler.h"

#include <neuron/futex.h>

#include <algorithm>

namespace neuron::sched {

CoreScheduler::CoreScheduler(uint32_t device, uint32_t cores, bool pooled)
	: device_(device), cores_(cores), pooled_(pooled), pools_(cores)
{
	for (uint32_t c = 0; c < cores; ++c)
		slots_.push_back(std::make_unique<Slot>());
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

std::vector<std::shared_ptr<LogicalCore>> CoreScheduler::logical_cores() const
{
	std::lock_guard lock(mutex_);
	return logical_;
}

void CoreScheduler::set_pools(uint32_t core, CorePools pools)
{
	{
		std::lock_guard lock(mutex_);
		pools_.at(core) = pools;
		bump_locked();
	}
	wake_all(); // a newly eligible logical core may be waiting anywhere
}

CorePools CoreScheduler::pools(uint32_t core) const
{
	std::lock_guard lock(mutex_);
	return pools_.at(core);
}

void CoreScheduler::request_switch(uint32_t core)
{
	// After the pools' generation: an engine that sees the flag re-reads its set first.
	slots_.at(core)->switch_pending.store(true, std::memory_order_seq_cst);
	wake(core);
}

void CoreScheduler::complete_switch(uint32_t core)
{
	if (!slots_[core]->switch_pending.exchange(false))
		return;
	if (on_switched)
		on_switched(core);
}

bool CoreScheduler::allows_locked(uint32_t core, Pool p) const
{
	if (!pooled_)
		return true;
	const CorePools &me = pools_[core];
	if (p == me.home || p == me.holder)
		return true;
	// A pool with no core on this device runs anywhere.
	return std::none_of(pools_.begin(), pools_.end(), [&](const CorePools &c) { return c.home == p || c.holder == p; });
}

bool CoreScheduler::allows(uint32_t core, Pool p) const
{
	std::lock_guard lock(mutex_);
	return allows_locked(core, p);
}

void CoreScheduler::eligible(uint32_t core, std::vector<std::shared_ptr<LogicalCore>> *out, uint64_t *gen) const
{
	std::lock_guard lock(mutex_);
	*gen = generation_.load(std::memory_order_acquire);
	out->clear();
	const bool allowed[kPoolCount] = {allows_locked(core, Pool::Inference), allows_locked(core, Pool::Training)};
	for (const auto &l : logical_)
		if (allowed[static_cast<int>(l->pool())])
			out->push_back(l);
}

} // namespace neuron::sched
