// The devices neurond drives and their engines (the emu backend: the simulated
// chip in-process). Built once at start-up and immutable after, so any thread may
// read it; the objects inside carry their own locks.
#pragma once

#include "config.h"

#include <device.h>
#include <engine.h>

#include <memory>
#include <vector>

namespace neuron::daemon {

struct DeviceSlot {
	std::unique_ptr<chip::Device> device;
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

private:
	std::vector<DeviceSlot> slots_;
};

} // namespace neuron::daemon
