#include "device_backend.h"

#include <sched/tile_runner.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace neuron::backend {

void DeviceBackend::add_device(uint32_t cores)
{
	const auto d = static_cast<uint32_t>(slots_.size());
	Slot s;
	s.cores = cores;
	s.cores_sched = std::make_unique<sched::CoreScheduler>(d, cores, true);
	s.cores_sched->on_switched = [this, d](uint32_t core) { switched(d, core); };
	s.dma_sched = std::make_unique<sched::CoreScheduler>(d, 1, false);
	for (uint32_t c = 0; c < cores; ++c)
		s.counters.push_back(std::make_unique<sched::CoreCounters>());
	s.dma_counters = std::make_unique<sched::CoreCounters>();
	slots_.push_back(std::move(s));
}

void DeviceBackend::switched(uint32_t device, uint32_t core)
{
	if (on_switched)
		on_switched(device, core);
}

void DeviceBackend::start()
{
	if (started_)
		return;
	started_ = true;
	sched::EngineOptions options;
	options.threads = settings_.threads;
	options.spin_ns = settings_.spin_ns;
	options.tile_budget = settings_.tile_budget;
	options.training_nice = settings_.training_nice;
	options.on_fault = [this](const Queue &q, uint32_t code, uint64_t seq, const std::string &reason) {
		if (on_fault)
			on_fault(q, code, seq, reason);
	};
	options.on_injected = [this](const Queue &q, const std::string &what) {
		if (on_injected)
			on_injected(q, what);
	};
	sched::EngineOptions dma_options = options;
	dma_options.tiling = false; // copies are not shared by priority; keep them whole and fast
	dma_options.dma = true;
	std::vector<sched::Engine *> all;
	for (uint32_t d = 0; d < slots_.size(); ++d) {
		Slot &s = slots_[d];
		const std::string dev = "nd" + std::to_string(d);
		for (uint32_t c = 0; c < s.cores; ++c) {
			options.faults = faults_for(d, static_cast<int>(c));
			s.engines.push_back(std::make_unique<sched::Engine>(*s.cores_sched, c, dev + "/nc" + std::to_string(c),
									   *s.counters[c], make_runner(d, static_cast<int>(c)),
									   options));
		}
		dma_options.faults = faults_for(d, -1);
		s.engines.push_back(std::make_unique<sched::Engine>(*s.dma_sched, 0, dev + "/dma", *s.dma_counters,
								   make_runner(d, -1), dma_options));
		for (auto &e : s.engines)
			all.push_back(e.get());
	}
	place_engines();
	if (settings_.watchdog_ms > 0 && resets_cores())
		watchdog_ = std::make_unique<sched::Watchdog>(std::move(all), settings_.watchdog_ms * 1'000'000);
}

// Each core's engine threads on CPUs of their own when the host has enough
// (sched/cpu_placement.h). A refusal (a cpuset that changed under us) leaves the
// thread where the host scheduler puts it: slower under contention, still correct.
void DeviceBackend::place_engines()
{
	uint32_t cores = 0;
	for (const Slot &s : slots_)
		cores += s.cores;
	placement_ = settings_.pin_cores
			     ? sched::CpuPlacement::plan_for_this_process(cores, std::max(settings_.threads, 1))
			     : sched::CpuPlacement::none("--pin-cores off");
	if (!placement_.pinned())
		return;
	size_t first = 0;
	for (uint32_t d = 0; d < slots_.size(); ++d) {
		Slot &s = slots_[d];
		const std::vector<std::vector<int>> cpus(placement_.per_core.begin() + long(first),
							 placement_.per_core.begin() + long(first + s.cores));
		for (uint32_t c = 0; c < s.cores; ++c)
			if (!s.engines[c]->pin(cpus[c]) && placement_.refused.empty())
				placement_.refused = "refused for nd" + std::to_string(d) + "/nc" + std::to_string(c) + ": " +
						     std::strerror(errno);
		if (!place_core_threads(d, cpus) && placement_.refused.empty())
			placement_.refused = "refused for a worker of nd" + std::to_string(d) + ": " + std::strerror(errno);
		first += s.cores;
	}
}

bool DeviceBackend::place_core_threads(uint32_t, const std::vector<std::vector<int>> &) { return true; }

std::vector<sched::InjectedFault> DeviceBackend::faults_for(uint32_t device, int core) const
{
	std::vector<sched::InjectedFault> out;
	for (const auto &f : settings_.faults)
		if (f.device == device && (f.on_dma_engine() ? core < 0 : core >= 0 && f.core == static_cast<uint32_t>(core)))
			out.push_back(f);
	return out;
}

std::shared_ptr<TenantContext> DeviceBackend::adopt_tenant(uint64_t tenant_id, pid_t pid, std::vector<int> kept_files)
{
	for (int fd : kept_files)
		if (fd >= 0)
			close(fd);
	return open_tenant(tenant_id, pid);
}

uint64_t DeviceBackend::watchdog_resets(uint32_t device) const
{
	const Slot &s = slots_.at(device);
	uint64_t n = s.dma_counters->resets.load(std::memory_order_relaxed);
	for (const auto &c : s.counters)
		n += c->resets.load(std::memory_order_relaxed);
	return n;
}

void DeviceBackend::stop()
{
	watchdog_.reset(); // it calls into the engines
	for (auto &s : slots_)
		for (auto &e : s.engines)
			e->stop();
}

} // namespace neuron::backend
