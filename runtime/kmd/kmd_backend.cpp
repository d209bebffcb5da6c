#include "kmd_backend.h"

#include "kmd_collective_mover.h"
#include "kmd_runner.h"
#include "kmd_tenant.h"

#include <chip/device.h> // kDeviceAddressBase
#include <chip/profile.h>

#include <algorithm>
#include <stdexcept>

namespace neuron::kmd {

namespace {
constexpr size_t kMaxFaultReports = 1024;
constexpr size_t kMaxDevices = 16;
} // namespace

// --- one device ----------------------------------------------------------------------

KmdDeviceSlot::KmdDeviceSlot(const Node &node, int threads_per_job) : path_(node.path)
{
	device_ = std::make_unique<KmdDevice>(node.path);
	info_ = device_->info();
	KmdEngineOptions opt;
	opt.threads_per_job = std::max(threads_per_job, 1);
	// The engine's workers: one per core the scheduler may keep busy at once (each
	// core has at most one job in the kernel), up to the host threads a job may use.
	opt.workers = static_cast<int>(std::max<uint32_t>(1, info_.num_cores));
	// Tenants see the emu backend's address layout: 0 is never a device address.
	opt.address_base = chip::kDeviceAddressBase;
	opt.on_fault = [this](const EngineJobFault &f) { record_fault(f); };
	opt.cancelled = [this](uint64_t client_id) { return cancelled(client_id); };
	// Tile kernels are validated for the profile the driver reports, the one the
	// daemon validates programs for at registration (describe()).
	if (const auto profile = chip::find_profile(info_.profile_name))
		opt.onchip = profile->onchip;
	engine_ = std::make_unique<KmdEngine>(node.path, opt);
	info_ = device_->refresh_info(); // engine_attached now
}

KmdDeviceSlot::~KmdDeviceSlot() { stop(); }

void KmdDeviceSlot::stop()
{
	if (engine_)
		engine_->stop();
}

void KmdDeviceSlot::record_fault(const EngineJobFault &f)
{
	std::lock_guard lock(faults_mutex_);
	faults_[{f.client_id, f.core, f.job_seq}] = f;
	while (faults_.size() > kMaxFaultReports)
		faults_.erase(faults_.begin());
}

void KmdDeviceSlot::cancel_client(uint64_t client_id)
{
	std::lock_guard lock(faults_mutex_);
	cancelled_.insert(client_id);
	while (cancelled_.size() > kMaxFaultReports)
		cancelled_.erase(cancelled_.begin());
}

bool KmdDeviceSlot::cancelled(uint64_t client_id)
{
	std::lock_guard lock(faults_mutex_);
	return cancelled_.count(client_id) != 0;
}

KmdContext &KmdDeviceSlot::collective_context()
{
	if (!collectives_)
		collectives_ = device_->create_context("neurond collectives", 0);
	return *collectives_;
}

std::optional<EngineJobFault> KmdDeviceSlot::take_fault(uint64_t client_id, uint32_t core, uint64_t job_seq)
{
	std::lock_guard lock(faults_mutex_);
	auto it = faults_.find({client_id, core, job_seq});
	if (it == faults_.end())
		return std::nullopt;
	auto f = it->second;
	faults_.erase(it);
	return f;
}

// --- the backend ---------------------------------------------------------------------

KmdBackend::KmdBackend(const std::vector<Node> &nodes, backend::EngineSettings settings)
	: DeviceBackend(std::move(settings))
{
	if (nodes.empty())
		throw std::runtime_error("no device node of driver neuron");
	for (size_t i = 0; i < nodes.size() && i < kMaxDevices; ++i) {
		devices_.push_back(std::make_unique<KmdDeviceSlot>(nodes[i], settings_.threads));
		add_device(devices_.back()->info().num_cores);
	}
}

bool KmdBackend::place_core_threads(uint32_t device, const std::vector<std::vector<int>> &core_cpus)
{
	return devices_.at(device)->place_workers(core_cpus);
}

KmdBackend::~KmdBackend() { stop(); }

// The injected faults are emulated in neurond's engines and tiles; on this backend
// the tiles run in the driver's jobs, and its faults and resets are the kernel's.
std::string KmdBackend::fault_injection_refusal() const
{
	return "fault injection works on --backend emu only: on kmd, commands run as neuron.ko jobs and the faults, "
	       "resets and timeouts are the driver's (its own job timeout is the watchdog)";
}

void KmdBackend::stop()
{
	DeviceBackend::stop(); // the scheduler's engines first: they submit to the devices
	for (auto &d : devices_)
		d->stop();
}

backend::DeviceInfo KmdBackend::describe(uint32_t device) const
{
	KmdDeviceSlot &slot = *devices_.at(device);
	const DeviceInfo now = slot.device().refresh_info();
	backend::DeviceInfo info;
	info.index = device;
	info.profile = now.profile_name;
	info.cores = now.num_cores;
	info.hbm_bytes = now.hbm_size;
	info.hbm_used_bytes = now.hbm_used;
	// The driver reports no fragmentation; what is free is an upper bound.
	info.hbm_largest_free_bytes = now.hbm_size - std::min(now.hbm_used, now.hbm_size);
	info.node = slot.path();
	info.resets = now.reset_count;
	return info;
}

std::shared_ptr<backend::TenantContext> KmdBackend::open_tenant(uint64_t tenant_id, pid_t pid)
{
	auto t = std::make_shared<KmdTenant>(tenant_id, pid, *this);
	tenants_.add(tenant_id, t);
	return t;
}

std::unique_ptr<backend::CollectiveMover> KmdBackend::collective_mover()
{
	return std::make_unique<KmdCollectiveMover>(*this);
}

std::shared_ptr<backend::TenantContext> KmdBackend::adopt_tenant(uint64_t tenant_id, pid_t pid,
								 std::vector<int> kept_files)
{
	auto t = std::make_shared<KmdTenant>(tenant_id, pid, *this, std::move(kept_files));
	tenants_.add(tenant_id, t);
	return t;
}

std::unique_ptr<sched::TileRunner> KmdBackend::make_runner(uint32_t device, int core)
{
	if (core < 0)
		return std::make_unique<KmdDmaRunner>(*this, device);
	return std::make_unique<KmdCoreRunner>(*this, device, static_cast<uint32_t>(core));
}

void KmdBackend::switched(uint32_t device, uint32_t core)
{
	// Core `core`'s engine is between tiles and runs nothing of the pool that lost
	// it: the kernel stops accepting that pool's jobs there too.
	sched::CoreScheduler &s = cores(device);
	for (const auto &l : s.logical_cores())
		if (!s.allows(core, l->pool()))
			if (auto t = tenants_.find(l->tenant()))
				t->revoke_core(device, core);
	DeviceBackend::switched(device, core);
}

} // namespace neuron::kmd
