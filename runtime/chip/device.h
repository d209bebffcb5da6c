// One simulated chip's memory: its HBM (bytes + allocator).
//
// Ownership: the daemon owns Devices for its whole life. memory_mutex_ guards the
// allocator; HBM bytes are guarded by the tenants' memory locks (TenantMemory).
#pragma once

#include "hbm_allocator.h"
#include "hbm_memory.h"
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

class Device {
public:
	Device(uint32_t index, Profile profile);
	// HBM in a memfd that can outlive neurond (hbm_memory.h): a new one
	// (kept_fd < 0) or the one an earlier neurond kept (taken over).
	Device(uint32_t index, Profile profile, int kept_fd);

	uint32_t index() const { return index_; }
	const Profile &profile() const { return profile_; }
	HbmMemory &hbm() { return hbm_; }

	// Allocates zeroed device memory; nullopt with *why on failure.
	std::optional<uint64_t> allocate(uint64_t size, uint64_t alignment, std::string *why);
	// Zeroes and frees an allocation (callers hold the owning tenant's memory
	// lock exclusively, so no engine is using it). False if address is unknown.
	bool release(uint64_t address);
	HbmStats stats() const;
	// Restart survival: an allocation an earlier neurond made, kept as it is.
	bool reserve(uint64_t address, uint64_t size, std::string *why);
	// Zeroes every free range (after the kept allocations are reserved: a
	// neurond that died while zeroing a freed range must not hand its bytes on).
	void zero_free();
	// The memfd behind the HBM, or -1.
	int hbm_memfd() const { return hbm_.memfd(); }

	// Host pointer of a device address already checked to be inside an allocation.
	std::byte *host_address(uint64_t device_address) { return hbm_.at(device_address - kDeviceAddressBase); }


private:
	uint32_t index_;
	Profile profile_;
	HbmMemory hbm_;
	mutable std::mutex memory_mutex_;
	HbmAllocator allocator_;
};

} // namespace neuron::chip
