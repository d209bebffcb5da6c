#include "logical_core.h"

#include <neuron/futex.h>

#include <algorithm>

namespace neuron::sched {

const char *pool_name(Pool p) { return p == Pool::Inference ? "inference" : "training"; }

void LogicalCore::add_queue(std::shared_ptr<Queue> q)
{
	std::lock_guard lock(queues_mutex_);
	queues_.push_back(std::move(q));
}

void LogicalCore::remove_queue(const Queue *q)
{
	std::lock_guard lock(queues_mutex_);
	std::erase_if(queues_, [q](const auto &p) { return p.get() == q; });
}

size_t LogicalCore::queue_count() const
{
	std::lock_guard lock(queues_mutex_);
	return queues_.size();
}

std::vector<std::shared_ptr<Queue>> LogicalCore::queues_snapshot()
{
	std::lock_guard lock(queues_mutex_);
	return queues_;
}

bool LogicalCore::runnable()
{
	if (active.load(std::memory_order_acquire))
		return true;
	bool pending = false;
	{
		std::lock_guard lock(queues_mutex_);
		for (const auto &q : queues_) {
			if (q->faulted() || q->retired())
				continue;
			// A command blocked on another queue is not work yet: counting it would
			// keep an engine polling it (and preempting others for it) until the
			// other queue gets there.
			if (q->ring().tail() > q->completed() &&
			    !q->blocking_peer()) {
				pending = true;
				break;
			}
		}
	}
	if (pending && pending_since_ns.load(std::memory_order_relaxed) == 0)
		pending_since_ns.store(detail::monotonic_ns(), std::memory_order_relaxed);
	return pending;
}

uint64_t LogicalCore::depth() const
{
	uint64_t d = 0;
	std::lock_guard lock(queues_mutex_);
	for (const auto &q : queues_) {
		if (q->faulted() || q->retired())
			continue;
		d += q->ring().depth(q->completed());
	}
	return d;
}

} // namespace neuron::sched
