// What a Tenant holds on the kmd backend: one driver context (open file) per
// device, its HBM allocations as device BOs, its host buffers imported into
// every context, and a ring pump per queue. The core mask of each context is
// the set of cores the tenant has queues on, set from the controller file, so
// the kernel refuses compute jobs on any other core.
//
// Owned by its Tenant and called on the control thread only; the state its
// pumps read is in KmdMemory (own lock) and the pump directory (own lock).
#pragma once

#include "chip_set.h"
#include "kmd_memory.h"
#include "kmd_pump.h"

#include <neuron.pb.h>

#include <map>
#include <memory>
#include <string>

namespace neuron::daemon {

class KmdTenant {
public:
	KmdTenant(uint64_t tenant_id, pid_t pid, ChipSet &chips);
	~KmdTenant(); // release_all()

	// Same contracts as Tenant's (an empty string or the error text).
	std::string alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address, api::ErrorCode *code);
	std::string free(uint32_t device, uint64_t address);
	std::string register_host(int fd, uint64_t size, uint32_t handle);
	std::string unregister_host(uint32_t handle);
	// Starts the ring pump of a queue the Tenant created (and, for a core queue,
	// allows its core in the context's mask).
	std::string add_queue(const std::shared_ptr<chip::Queue> &q);
	// Stops its pump (the queue must already be retired).
	void remove_queue(uint64_t id);
	void release_all();

	uint64_t device_bytes(uint32_t device) const;

private:
	std::string ready() const; // why the contexts are missing, or empty
	void update_core_mask(uint32_t device);

	uint64_t id_;
	ChipSet &chips_;
	std::shared_ptr<KmdMemory> memory_ = std::make_shared<KmdMemory>();
	std::shared_ptr<KmdPumpDirectory> directory_ = std::make_shared<KmdPumpDirectory>();
	struct QueueEntry {
		std::shared_ptr<chip::Queue> queue;
		std::shared_ptr<KmdPump> pump;
	};
	std::map<uint64_t, QueueEntry> queues_;
	bool released_ = false;
};

} // namespace neuron::daemon
