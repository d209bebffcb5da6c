// One simulated chip: its HBM (bytes + allocator) and its engines' counters.
//
// Ownership: the daemon owns Devices for its whole life. memory_mutex_ guards the
// allocator; HBM bytes are guarded by the tenants' memory locks (TenantMemory).
#pragma once

#include "hbm_allocator.h"
#include "hbm_memory.h"
#include "latency_histogram.h"
#include "profile.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace neuron::chip {

// Device addresses start here so that 0 is never a valid device address and a
// stray host pointer or small integer is never mistaken for one.
inline constexpr uint64_t kDeviceAddressBase = 1ull << 44;

// Written by the core's engine thread, read by telemetry (relaxed).
struct CoreCounters {
	std::atomic<uint64_t> busy_ns{0};
	std::atomic<uint64_t> commands{0};
	std::atomic<uint64_t> tiles{0};
	std::atomic<uint64_t> max_tile_ns{0};  // longest tile so far, wall time (host preemption included)
	// Longest tile of a command cut into several, in the engine thread's CPU time: the
	// tile's own cost, the preemption bound the tiling controls (on a shared host
	// the wall time also counts slices in which the OS ran something else).
	std::atomic<uint64_t> max_tile_cpu_ns{0};
	// Wall times of the tiles of tiled commands: percentiles tell the tiling's bound
	// apart from the odd tile a busy host stretched (which the maximum reports).
	LatencyHistogram tile_ns;
	// The same tiles' CPU times, and how many took more than 1 ms of it: the rare
	// long ones are hard to tell from a host that stole the vCPU (the test VMs do
	// not account steal time), a distribution is not.
	LatencyHistogram tile_cpu_ns;
	std::atomic<uint64_t> tiles_over_1ms_cpu{0};
	std::atomic<uint64_t> last_tenant{0};  // tenant of the latest tile (0: none yet)
	std::atomic<uint8_t> last_pool{0};     // its pool (chip::Pool)
};

class Device {
public:
	Device(uint32_t index, Profile profile);

	uint32_t index() const { return index_; }
	const Profile &profile() const { return profile_; }
	HbmMemory &hbm() { return hbm_; }

	// Allocates zeroed device memory; nullopt with *why on failure.
	std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment, std::string *why);
	// Zeroes and frees an allocation (callers hold the owning tenant's memory
	// lock exclusively, so no engine is using it). False if address is unknown.
	bool release(uint64_t address);
	HbmStats stats() const;

	// Host pointer of a device address already checked to be inside an allocation.
	std::byte *host_address(uint64_t device_address) { return hbm_.at(device_address - kDeviceAddressBase); }

	CoreCounters &core_counters(uint32_t core) { return *core_counters_.at(core); }
	CoreCounters &dma_counters() { return dma_counters_; }

private:
	uint32_t index_;
	Profile profile_;
	HbmMemory hbm_;
	mutable std::mutex memory_mutex_;
	HbmAllocator allocator_;
	std::vector<std::unique_ptr<CoreCounters>> core_counters_;
	CoreCounters dma_counters_;
};

} // namespace neuron::chip
