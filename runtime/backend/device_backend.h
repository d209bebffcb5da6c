// The one device-backend interface (DESIGN.md section 1): what neurond needs of
// the devices, whichever kind they are. Two implementations:
//  - emu (runtime/emu): the simulated chip in this process;
//  - kmd (runtime/kmd): /dev/accel/accelN of driver neuron, neurond attached as
//    the devices' compute engine.
// Both run the same scheduling (runtime/sched): per device a CoreScheduler for the
// NeuronCores (pools, logical cores) and one for the DMA engine, an Engine thread per
// physical core and one for DMA, each with the backend's TileRunner. What differs
// is only where tiles run (the runner), how memory is allocated and where it lies
// (the TenantContext), and how a device is described.
//
// Ownership and threads: neurond creates one backend at start (select.h) and
// destroys it at exit. Construction builds the devices; start() starts the engines
// once the daemon has set each core's pools and the hooks; everything else is
// called on the control thread, except the hooks, which engines call.
#pragma once

#include "collective_mover.h"
#include "tenant_context.h"

#include <sched/core_scheduler.h>
#include <sched/counters.h>
#include <sched/cpu_placement.h>
#include <sched/engine.h>
#include <sched/fault_injection.h>
#include <sched/watchdog.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace neuron::backend {

// One device as ListDevices, neuron-ls and the metrics describe it.
struct DeviceInfo {
	uint32_t index = 0;
	std::string profile;           // trn1, trn2, trn3
	uint32_t cores = 0;
	uint64_t hbm_bytes = 0;
	uint64_t hbm_used_bytes = 0;
	uint64_t hbm_largest_free_bytes = 0;
	std::string pci_bdf = "sim";
	int32_t numa_node = -1;
	std::string node;              // what the backend drives ("in-process", "/dev/accel/accel0")
	uint64_t resets = 0;           // core resets since start (the driver's watchdog, or neurond's on emu)
};

// How the engines run: the daemon's settings (flags and config file).
struct EngineSettings {
	int threads = 1;          // host threads one command may use
	uint64_t spin_ns = 50000; // engines poll this long after work before they sleep
	sched::TileBudget tile_budget;
	int training_nice = 0;    // sched::EngineOptions::training_nice
	// Give each core's engine threads host CPUs of their own when there are enough
	// (sched/cpu_placement.h); false: the host scheduler places every thread.
	bool pin_cores = true;
	// Resets a core whose tile group makes no progress for this long (0: never);
	// backends whose device has its own watchdog ignore it (resets_cores()).
	uint64_t watchdog_ms = 10000;
	// Test only (neurond --enable-fault-injection): sched/fault_injection.h.
	std::vector<sched::InjectedFault> faults;
};

class DeviceBackend {
public:
	virtual ~DeviceBackend() = default;
	DeviceBackend(const DeviceBackend &) = delete;
	DeviceBackend &operator=(const DeviceBackend &) = delete;

	virtual const char *name() const = 0; // "emu" or "kmd"
	uint32_t device_count() const { return static_cast<uint32_t>(slots_.size()); }
	uint32_t core_count(uint32_t device) const { return slots_.at(device).cores; }
	virtual DeviceInfo describe(uint32_t device) const = 0;

	// Scheduling state of a device's NeuronCores (pooled) and of its DMA engine.
	sched::CoreScheduler &cores(uint32_t device) { return *slots_.at(device).cores_sched; }
	sched::CoreScheduler &dma(uint32_t device) { return *slots_.at(device).dma_sched; }
	const sched::CoreCounters &core_counters(uint32_t device, uint32_t core) const
	{
		return *slots_.at(device).counters.at(core);
	}
	const sched::CoreCounters &dma_counters(uint32_t device) const { return *slots_.at(device).dma_counters; }

	// A new tenant's context. Throws std::runtime_error with the reason it cannot
	// have one (e.g. the driver refused to open a file for it).
	virtual std::shared_ptr<TenantContext> open_tenant(uint64_t tenant_id, pid_t pid) = 0;
	// Restart survival: the context of a tenant of the neurond before this one,
	// built on `kept_files` (its TenantContext::kept_files() then, by device, -1
	// where one was not kept; owned from here on). Backends that keep no files
	// open a new context. Throws as open_tenant.
	virtual std::shared_ptr<TenantContext> adopt_tenant(uint64_t tenant_id, pid_t pid, std::vector<int> kept_files);

	// The data movement of one collective between tenants' device memory
	// (collective_mover.h); called on the collective runner's thread.
	virtual std::unique_ptr<CollectiveMover> collective_mover() = 0;

	// Restart survival (daemon/README.md). The memfd behind `device`'s memory that
	// neurond keeps with its supervisor, or -1 if this backend keeps none.
	virtual int kept_memory_fd(uint32_t) const { return -1; }
	// Why tenants' device memory cannot survive a restart of neurond on this
	// backend, or "" if it can (adopt_allocation works).
	virtual std::string restart_unsupported() const { return "this backend keeps no device memory across a restart"; }
	// After every kept allocation was adopted: memory nobody holds is zeroed.
	virtual void adoption_done() {}

	// Engine threads call these; set them before start().
	std::function<void(const Queue &, uint32_t code, uint64_t seq, const std::string &reason)> on_fault;
	// A switch asked for with CoreScheduler::request_switch is complete.
	std::function<void(uint32_t device, uint32_t core)> on_switched;
	// An injected fault (test only) fired on a tenant's queue.
	std::function<void(const Queue &, const std::string &what)> on_injected;

	// Whether neurond's watchdog resets this backend's cores (emu), or the
	// device's own does (kmd: the driver's job timeout).
	virtual bool resets_cores() const { return true; }
	// Why this backend cannot take EngineSettings::faults, or "" if it can.
	virtual std::string fault_injection_refusal() const { return {}; }
	// Resets of `device`'s cores by neurond's watchdog since start.
	uint64_t watchdog_resets(uint32_t device) const;
	// Where the core engines run (set by start()).
	const sched::CpuPlacement &placement() const { return placement_; }

	// Starts every engine. Once.
	void start();
	// Stops every engine (joins them). Idempotent; the destructor calls it.
	virtual void stop();

protected:
	explicit DeviceBackend(EngineSettings settings) : settings_(std::move(settings)) {}
	// A device with `cores` NeuronCores: its schedulers and counters.
	void add_device(uint32_t cores);
	// The runner of physical core `core` of `device` (core < 0: its DMA engine).
	virtual std::unique_ptr<sched::TileRunner> make_runner(uint32_t device, int core) = 0;
	// A switch completed (engine thread): the backend's own bookkeeping first (kmd:
	// the kernel's core masks), then the daemon's hook.
	virtual void switched(uint32_t device, uint32_t core);
	// Backends whose cores have threads of their own besides the engines (kmd: the
	// compute engine's workers) pin them here: `core_cpus[c]` for core c of `device`.
	// Called by start() when the cores are pinned; false with errno if refused.
	virtual bool place_core_threads(uint32_t device, const std::vector<std::vector<int>> &core_cpus);
	// The injected faults (test only) meant for `device`'s core `core` (< 0: its DMA engine).
	std::vector<sched::InjectedFault> faults_for(uint32_t device, int core) const;

	EngineSettings settings_;

private:
	struct Slot {
		uint32_t cores = 0;
		std::unique_ptr<sched::CoreScheduler> cores_sched;
		std::unique_ptr<sched::CoreScheduler> dma_sched;
		std::vector<std::unique_ptr<sched::CoreCounters>> counters;
		std::unique_ptr<sched::CoreCounters> dma_counters;
		std::vector<std::unique_ptr<sched::Engine>> engines; // cores, then DMA last
	};
	void place_engines();

	std::vector<Slot> slots_;
	std::unique_ptr<sched::Watchdog> watchdog_; // after the engines it watches; stopped first
	bool started_ = false;
	sched::CpuPlacement placement_;
};

} // namespace neuron::backend
