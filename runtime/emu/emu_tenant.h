// A tenant of the emu backend: its allocations come from the simulated devices'
// HBM allocators and lie in this process (TenantMemory records their host
// addresses for the in-process engines); its host buffers are its memfds mapped
// here.
//
// Threads: control thread only (TenantContext's contract).
#pragma once

#include <backend/tenant_context.h>
#include <chip/device.h>

#include <vector>

namespace neuron::emu {

class EmuTenant final : public backend::TenantContext {
public:
	EmuTenant(uint64_t tenant_id, std::vector<chip::Device *> devices);
	~EmuTenant() override; // release()

	backend::Result alloc(uint32_t device, uint64_t size, uint64_t alignment, uint64_t *address) override;
	backend::Result free(uint32_t device, uint64_t address) override;
	backend::Result adopt_allocation(uint32_t device, uint64_t address, uint64_t size, uint32_t) override;
	backend::Result register_host(int memfd, uint64_t size, uint32_t handle) override;
	backend::Result unregister_host(uint32_t handle) override;
	backend::Result attach_queue(backend::Queue &) override { return std::nullopt; }
	void detach_queue(backend::Queue &) override {}
	std::optional<uint64_t> enforced_core_mask(uint32_t) const override { return std::nullopt; }
	void release() override;

private:
	std::vector<chip::Device *> devices_;
	bool released_ = false;
};

} // namespace neuron::emu
