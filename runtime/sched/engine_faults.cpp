// The Engine's side of core resets (the watchdog's) and of injected faults (test
// only, fault_injection.h). See engine.h.
#include "engine.h"

#include <backend/queue.h>

#include <neuron/cmd.h>
#include <neuron/futex.h>

#include <algorithm>

namespace neuron::sched {

using detail::atomic_u32;
using detail::monotonic_ns;

namespace {

std::string injected(const InjectedFault &f)
{
	return std::string("injected ") + injected_fault_kind_name(f.kind) + " (--inject-fault " + f.spec + ")";
}

} // namespace

uint64_t Engine::stalled_ns(uint64_t now, uint64_t *group_start_ns) const
{
	const uint64_t since = counters_.running_since_ns.load(std::memory_order_acquire);
	*group_start_ns = since;
	if (since == 0)
		return 0;
	const uint64_t last = std::max(since, progress_ns_.load(std::memory_order_relaxed));
	return now > last ? now - last : 0;
}

bool Engine::request_reset(uint64_t group_start_ns, std::string reason)
{
	{
		std::lock_guard lock(reset_mutex_);
		if (reset_pending_.load(std::memory_order_relaxed))
			return false;
		reset_group_ = group_start_ns;
		reset_reason_ = std::move(reason);
		reset_pending_.store(true, std::memory_order_release);
	}
	atomic_u32(reset_word_).fetch_add(1);
	detail::futex_wake_all(&reset_word_);
	return true;
}

// A reset meant for an earlier group (the watchdog saw it stalled just before it
// ended) is dropped: it must not hit the next tenant's command.
std::optional<std::string> Engine::take_reset(uint64_t group_start_ns)
{
	if (!reset_pending_.load(std::memory_order_acquire))
		return std::nullopt;
	std::lock_guard lock(reset_mutex_);
	reset_pending_.store(false, std::memory_order_relaxed);
	if (reset_group_ != group_start_ns)
		return std::nullopt;
	return std::move(reset_reason_);
}

// Sleeps until a reset is asked for, the engine stops, or max_ns passed.
void Engine::wait_for_reset_or_stop(uint64_t max_ns)
{
	const uint64_t end = monotonic_ns() + max_ns;
	for (;;) {
		const uint32_t seen = atomic_u32(reset_word_).load();
		if (reset_pending_.load(std::memory_order_acquire) || stop_.load(std::memory_order_acquire))
			return;
		const uint64_t now = monotonic_ns();
		if (now >= end)
			return;
		const uint64_t left = std::min<uint64_t>(end - now, 100'000'000); // re-check stop_ now and then
		struct timespec t = {static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
		detail::futex_wait(&reset_word_, seen, &t);
	}
}

// A command passed the gate on this engine: an injected engine fault or DMA error
// hits it now (it runs nothing), a stuck core stalls on it once its group starts.
bool Engine::inject_at_start(Queue &q, uint64_t seq, uint64_t user_tag)
{
	const InjectedFault *f = injector_.next_command();
	if (!f)
		return false;
	if (options_.on_injected)
		options_.on_injected(q, injected(*f) + " hit queue " + std::to_string(q.id()) + " seq " + std::to_string(seq) +
					      " on " + name_);
	if (f->kind == InjectedFault::Kind::StuckCore) {
		stall_next_ = f;
		return false;
	}
	const std::string what = f->kind == InjectedFault::Kind::DmaError ? "the DMA engine " + name_ + " failed the copy"
									  : "the engine faulted on " + name_;
	fault(q, NEURON_FAULT_EXEC, seq, user_tag, injected(*f) + ": " + what);
	return true;
}

// A stuck core: no tile ends until the watchdog resets it (or the daemon stops).
Outcome Engine::stall(uint64_t group_start_ns)
{
	const InjectedFault *f = stall_next_;
	stall_next_ = nullptr;
	std::optional<std::string> reason;
	while (!reason && !stop_.load(std::memory_order_acquire)) {
		wait_for_reset_or_stop(UINT64_MAX / 2);
		reason = take_reset(group_start_ns);
	}
	if (!reason)
		return Outcome::of(Outcome::Ended); // stopping: the daemon ends anyway
	counters_.resets.fetch_add(1, std::memory_order_relaxed);
	return Outcome::fault(NEURON_FAULT_RESET, *reason + "; it was stuck by " + injected(*f));
}

// A slow core: the group that took group_ns holds the core (factor - 1) times as
// long again. The tiles made their progress (the watchdog does not count this).
void Engine::slow_down(Queue &q, uint64_t group_ns)
{
	bool first = false;
	const InjectedFault *f = injector_.slow(&first);
	if (!f)
		return;
	if (first && options_.on_injected)
		options_.on_injected(q, injected(*f) + ": " + name_ + " runs " + std::to_string(f->factor) +
					      " times slower from here on (first hit: queue " + std::to_string(q.id()) + ")");
	progress_ns_.store(monotonic_ns(), std::memory_order_relaxed);
	wait_for_reset_or_stop(group_ns * (f->factor - 1));
}

} // namespace neuron::sched
