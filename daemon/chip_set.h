// The devices neurond drives and their engines (the emu backend: the simulated
// chip in-process). Built once at start-up and immutable after, so any thread may
// read it; the objects inside carry their own locks. The two hooks are set before
// the server accepts tenants and only read after.
#pragma once

#include "config.h"

#include <core_scheduler.h>
#include <device.h>
#include <engine.h>

#include <functional>
#include <memory>
#include <vector>

namespace neuron::daemon {

struct DeviceSlot {
	std::unique_ptr<chip::Device> device;
	std::unique_ptr<chip::CoreScheduler> cores_sched; // leases + logical cores of the NeuronCores
	std::unique_ptr<chip::CoreScheduler> dma_sched;   // unpooled: the DMA engine serves every tenant
	std::vector<std::unique_ptr<chip::Engine>> cores;
	std::unique_ptr<chip::Engine> dma;
};

class ChipSet {
public:
	// Throws std::runtime_error with a readable reason.
	explicit ChipSet(const Config &config);
	~ChipSet();

	size_t size() const { return slots_.size(); }
	DeviceSlot &slot(size_t i) { return slots_.at(i); }
	void stop();

	// Engine threads call these; set them before tenants connect.
	std::function<void(const chip::Queue &, uint32_t code, uint64_t seq, const std::string &reason)> fault_hook;
	std::function<void(const chip::ReclaimDone &)> reclaim_hook;

private:
	std::vector<DeviceSlot> slots_;
};

} // namespace neuron::daemon
