// The devices neurond drives and their engines, on one of two backends:
//  - emu: the simulated chip in-process (chip::Device + chip::Engine threads);
//  - kmd: /dev/accel/accelN of driver neuron (KmdChip: controller + engine), with
//    a ring pump per tenant queue (KmdTenant) feeding the kernel's queues.
// Built once at start-up and immutable after, so any thread may read it; the
// objects inside carry their own locks. The two hooks are set before the server
// accepts tenants and only read after.
#pragma once

#include "config.h"
#include "kmd_chip.h"

#include <core_scheduler.h>
#include <device.h>
#include <engine.h>

#include <functional>
#include <memory>
#include <vector>

namespace neuron::daemon {

enum class Backend { Emu, Kmd };

struct DeviceSlot {
	uint32_t core_count = 0;
	std::unique_ptr<chip::Device> device;             // emu only
	std::unique_ptr<KmdChip> kmd;                     // kmd only
	// Both backends keep the lease bookkeeping (pools, loans); only emu engines
	// schedule on it (the kmd backend's per-core order is the kernel's).
	std::unique_ptr<chip::CoreScheduler> cores_sched; // leases + logical cores of the NeuronCores
	std::unique_ptr<chip::CoreScheduler> dma_sched;   // unpooled: the DMA engine serves every tenant
	std::vector<std::unique_ptr<chip::Engine>> cores; // emu only
	std::unique_ptr<chip::Engine> dma;                // emu only
};

class ChipSet {
public:
	// Throws std::runtime_error with a readable reason.
	explicit ChipSet(const Config &config);
	~ChipSet();

	size_t size() const { return slots_.size(); }
	DeviceSlot &slot(size_t i) { return slots_.at(i); }
	void stop();

	Backend backend() const { return backend_; }
	const char *backend_name() const { return backend_ == Backend::Kmd ? "kmd" : "emu"; }
	// Per-core counters of either backend (telemetry).
	const chip::CoreCounters &core_counters(uint32_t device, uint32_t core);

	// Engine threads call these; set them before tenants connect.
	std::function<void(const chip::Queue &, uint32_t code, uint64_t seq, const std::string &reason)> fault_hook;
	std::function<void(const chip::ReclaimDone &)> reclaim_hook;

private:
	void build_emu(const Config &config);
	// Throws (kmd::Error, std::runtime_error) with the reason kmd cannot be used.
	void build_kmd(const Config &config, const std::vector<kmd::Node> &nodes);
	void add_schedulers(DeviceSlot &slot, uint32_t device, uint32_t cores, uint32_t inference);

	Backend backend_ = Backend::Emu;
	std::vector<DeviceSlot> slots_;
};

} // namespace neuron::daemon
