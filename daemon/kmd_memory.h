// One tenant's memory on the kmd backend: its driver contexts (one open file of
// each device, DESIGN.md section 6), its HBM allocations (device BOs) and its host
// buffers (the tenant's memfds imported into every context).
//
// Ownership and lock: the tenant (KmdTenant, control thread) creates it and writes
// the maps with `mutex` held exclusively; its ring pumps read them with `mutex`
// held shared while they validate a command and submit its job, so a BO is never
// closed between the check and the submit (after the submit the kernel holds its
// own reference until the job ends). `contexts` is fixed at construction.
#pragma once

#include <device.h> // chip::kDeviceAddressBase
#include <kmd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

namespace neuron::daemon {

struct KmdAllocation {
	kmd::DeviceBuffer buffer; // the BO (its HBM address is the kernel's, from 0)
	uint64_t address = 0;     // what the tenant was given (aligned inside the BO)
	uint64_t size = 0;        // what the tenant asked for
	// Tenant address of the BO's first byte: the emu layout (0 is never valid).
	uint64_t bo_address() const { return chip::kDeviceAddressBase + buffer.device_addr; }
};

struct KmdHost {
	uint64_t size = 0;
	std::vector<kmd::HostBuffer> per_device; // the memfd imported into each device's context
};

class KmdMemory {
public:
	mutable std::shared_mutex mutex;
	std::vector<std::unique_ptr<kmd::KmdContext>> contexts; // by device; fixed after construction
	std::string context_error; // why contexts is empty (opening the driver failed), or empty

	std::map<uint32_t, std::map<uint64_t, KmdAllocation>> device; // device -> tenant address -> allocation
	std::map<uint32_t, KmdHost> host;                             // handle -> buffer

	// With `mutex` held: the allocation on `dev` that holds all of
	// [address, address + bytes), or nullptr.
	const KmdAllocation *find(uint32_t dev, uint64_t address, uint64_t bytes) const
	{
		auto d = device.find(dev);
		if (d == device.end())
			return nullptr;
		auto it = d->second.upper_bound(address);
		if (it == d->second.begin())
			return nullptr;
		--it;
		const KmdAllocation &a = it->second;
		if (address - a.address > a.size || bytes > a.size - (address - a.address))
			return nullptr;
		return &a;
	}
	uint64_t device_bytes(uint32_t dev) const
	{
		uint64_t n = 0;
		if (auto d = device.find(dev); d != device.end())
			for (const auto &[addr, a] : d->second)
				n += a.size;
		return n;
	}
};

} // namespace neuron::daemon
