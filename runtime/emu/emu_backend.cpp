#include "emu_backend.h"

#include "emu_collective_mover.h"
#include "emu_runner.h"
#include "emu_tenant.h"

namespace neuron::emu {

EmuBackend::EmuBackend(const chip::Profile &profile, uint32_t devices, backend::EngineSettings settings,
		       bool keep_hbm, const std::vector<int> &kept_hbm)
	: DeviceBackend(std::move(settings))
{
	for (uint32_t d = 0; d < devices; ++d) {
		if (keep_hbm)
			devices_.push_back(std::make_unique<chip::Device>(d, profile, d < kept_hbm.size() ? kept_hbm[d] : -1));
		else
			devices_.push_back(std::make_unique<chip::Device>(d, profile));
		add_device(profile.cores);
	}
}

EmuBackend::~EmuBackend() { stop(); } // engines first: their tiles use the devices

backend::DeviceInfo EmuBackend::describe(uint32_t device) const
{
	const chip::Device &d = *devices_.at(device);
	const chip::HbmStats s = d.stats();
	backend::DeviceInfo info;
	info.index = device;
	info.profile = d.profile().name;
	info.cores = d.profile().cores;
	info.hbm_bytes = s.total_bytes;
	info.hbm_used_bytes = s.used_bytes;
	info.hbm_largest_free_bytes = s.largest_free_bytes;
	info.node = "in-process";
	info.resets = watchdog_resets(device);
	return info;
}

std::shared_ptr<backend::TenantContext> EmuBackend::open_tenant(uint64_t tenant_id, pid_t)
{
	std::vector<chip::Device *> devices;
	for (auto &d : devices_)
		devices.push_back(d.get());
	return std::make_shared<EmuTenant>(tenant_id, std::move(devices));
}

std::unique_ptr<backend::CollectiveMover> EmuBackend::collective_mover()
{
	return std::make_unique<EmuCollectiveMover>();
}

std::string EmuBackend::restart_unsupported() const
{
	if (!devices_.empty() && devices_.front()->hbm_memfd() < 0)
		return "the simulated HBM is private memory (neurond runs without a supervisor that keeps state)";
	return {};
}

void EmuBackend::adoption_done()
{
	for (auto &d : devices_)
		d->zero_free();
}

std::unique_ptr<sched::TileRunner> EmuBackend::make_runner(uint32_t, int) { return std::make_unique<EmuRunner>(); }

} // namespace neuron::emu
