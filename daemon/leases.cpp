#include "leases.h"

#include <neuron/futex.h>

#include <algorithm>
#include <chrono>

namespace neuron::daemon {

using detail::monotonic_ns;
using sched::CorePools;

const char *lease_state_name(LeaseState s)
{
	switch (s) {
	case LeaseState::Owned: return "owned";
	case LeaseState::Lent: return "lent";
	case LeaseState::Reclaiming: return "reclaiming";
	}
	return "unknown";
}

Pool other_pool(Pool p) { return p == Pool::Inference ? Pool::Training : Pool::Inference; }

Leases::Leases(backend::DeviceBackend &devices, uint32_t inference_cores) : devices_(devices)
{
	const uint64_t now = monotonic_ns();
	for (uint32_t d = 0; d < devices.device_count(); ++d) {
		std::vector<CoreLease> cores(devices.core_count(d));
		for (uint32_t c = 0; c < cores.size(); ++c) {
			cores[c].home = cores[c].holder = c < inference_cores ? Pool::Inference : Pool::Training;
			cores[c].since_ns = now;
			devices.cores(d).set_pools(c, {cores[c].home, cores[c].holder});
		}
		leases_.push_back(std::move(cores));
	}
}

CoreLease &Leases::at(uint32_t device, uint32_t core) { return leases_.at(device).at(core); }

std::vector<CoreLease> Leases::of(uint32_t device) const
{
	std::lock_guard lock(mutex_);
	return leases_.at(device);
}

uint32_t Leases::held(uint32_t device, Pool pool) const
{
	std::lock_guard lock(mutex_);
	const auto &v = leases_.at(device);
	return static_cast<uint32_t>(std::count_if(v.begin(), v.end(), [&](const CoreLease &l) { return l.holder == pool; }));
}

uint32_t Leases::homed(uint32_t device, Pool pool) const
{
	std::lock_guard lock(mutex_);
	const auto &v = leases_.at(device);
	return static_cast<uint32_t>(std::count_if(v.begin(), v.end(), [&](const CoreLease &l) { return l.home == pool; }));
}

std::string Leases::lend(uint32_t device, uint32_t core)
{
	if (device >= leases_.size() || core >= leases_[device].size())
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device);
	CorePools pools;
	{
		std::lock_guard lock(mutex_);
		CoreLease &l = at(device, core);
		if (l.state != LeaseState::Owned)
			return "core " + std::to_string(core) + " of device " + std::to_string(device) + " is " +
			       lease_state_name(l.state) + ", not owned by its home pool";
		l.holder = other_pool(l.home);
		l.state = LeaseState::Lent;
		l.since_ns = monotonic_ns();
		pools = {l.home, l.holder};
	}
	devices_.cores(device).set_pools(core, pools);
	return {};
}

std::string Leases::begin_reclaim(uint32_t device, uint32_t core, uint64_t deadline_ns)
{
	if (device >= leases_.size() || core >= leases_[device].size())
		return "core " + std::to_string(core) + " does not exist on device " + std::to_string(device);
	CorePools pools;
	{
		std::lock_guard lock(mutex_);
		CoreLease &l = at(device, core);
		if (l.state != LeaseState::Lent)
			return "core " + std::to_string(core) + " of device " + std::to_string(device) + " is " +
			       lease_state_name(l.state) + ", not lent";
		l.holder = l.home;
		l.state = LeaseState::Reclaiming;
		l.reclaim_start_ns = monotonic_ns();
		l.reclaim_deadline_ns = deadline_ns;
		pools = {l.home, l.holder};
	}
	sched::CoreScheduler &s = devices_.cores(device);
	s.set_pools(core, pools);
	s.request_switch(core); // after the pools: the engine re-reads its set first
	return {};
}

bool Leases::wait_reclaimed(uint32_t device, uint32_t core, uint64_t deadline_ns)
{
	std::unique_lock lock(mutex_);
	for (;;) {
		if (at(device, core).state != LeaseState::Reclaiming)
			return true;
		const uint64_t now = monotonic_ns();
		if (now >= deadline_ns)
			return false;
		reclaimed_.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
	}
}

void Leases::switched(uint32_t device, uint32_t core)
{
	ReclaimDone done;
	{
		std::lock_guard lock(mutex_);
		CoreLease &l = at(device, core);
		if (l.state != LeaseState::Reclaiming)
			return;
		const uint64_t now = monotonic_ns();
		done.device = device;
		done.core = core;
		done.lender = l.home;
		done.borrower = other_pool(l.home);
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

} // namespace neuron::daemon
