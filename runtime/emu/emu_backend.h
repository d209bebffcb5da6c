// The emu backend: the simulated chip in this process (DESIGN.md section 2). Each
// device is a chip::Device (HBM bytes behind a best-fit allocator); its engines'
// tiles run on the core's host threads (EmuRunner). Tenants get an EmuTenant.
//
// Ownership: built by select.h at neurond's start; the devices live as long as it.
#pragma once

#include <backend/device_backend.h>
#include <chip/device.h>
#include <chip/profile.h>

#include <memory>
#include <vector>

namespace neuron::emu {

class EmuBackend final : public backend::DeviceBackend {
public:
	// keep_hbm: each device's HBM in a memfd (kept_hbm[d] >= 0: the one an earlier
	// neurond kept, taken over; else a new one).
	EmuBackend(const chip::Profile &profile, uint32_t devices, backend::EngineSettings settings,
		   bool keep_hbm = false, const std::vector<int> &kept_hbm = {});
	~EmuBackend() override;

	const char *name() const override { return "emu"; }
	backend::DeviceInfo describe(uint32_t device) const override;
	std::shared_ptr<backend::TenantContext> open_tenant(uint64_t tenant_id, pid_t pid) override;
	std::unique_ptr<backend::CollectiveMover> collective_mover() override;
	int kept_memory_fd(uint32_t device) const override { return devices_.at(device)->hbm_memfd(); }
	std::string restart_unsupported() const override;
	void adoption_done() override;

private:
	std::unique_ptr<sched::TileRunner> make_runner(uint32_t device, int core) override;

	std::vector<std::unique_ptr<chip::Device>> devices_;
};

} // namespace neuron::emu
