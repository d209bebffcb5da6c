// The kmd backend: the devices of driver neuron (/dev/accel/accelN), each opened
// as its controller (KmdDevice: device info, per-tenant core masks) and with
// neurond attached as its compute engine (KmdEngine: runs the compute jobs the
// kernel hands over, on the op kernels). neurond's own scheduler decides what each
// physical core runs next (runtime/sched, as on emu): its engines hand the chosen
// tiles to the kernel as jobs of the tenant's own driver file (KmdRunner), at most
// one per physical core at a time, so inference priority, weights, loans and
// reclaims act within a tile here too.
//
// Ownership: built by select.h at neurond's start, destroyed at exit. The devices
// are fixed after construction. Engine threads record job faults (faults_mutex_)
// and read the tenants' masks through their KmdTenant (its own lock).
#pragma once

#include "kmd.h"

#include <backend/device_backend.h>
#include <backend/weak_directory.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace neuron::kmd {

class KmdTenant;

// One device node: its controller file, what the driver says it is, its engine.
class KmdDeviceSlot {
public:
	// Opens `node` as controller and attaches the engine (threads_per_job host
	// threads per job). Throws kmd::Error (EPERM without CAP_SYS_ADMIN, EBUSY when
	// another engine is attached: another neurond).
	KmdDeviceSlot(const Node &node, int threads_per_job);
	~KmdDeviceSlot(); // stop()

	KmdDevice &device() { return *device_; }
	const DeviceInfo &info() const { return info_; }
	const std::string &path() const { return path_; }
	void stop(); // detaches the engine
	// The compute engine's workers on the CPUs of the cores they serve.
	bool place_workers(const std::vector<std::vector<int>> &core_cpus) { return engine_->pin_workers(core_cpus); }

	// The reason the engine gave for a failed job, if it reported one (the engine
	// reports before it completes the job; kernel-side failures such as timeouts
	// have none). Removes it.
	std::optional<EngineJobFault> take_fault(uint64_t client_id, uint32_t core, uint64_t job_seq);
	// neurond's own file of this device for collective groups' jobs (every core,
	// every DMA queue), opened at first use. The collective runner's thread only
	// (kmd_collective_mover.h). Throws kmd::Error.
	KmdContext &collective_context();
	// A tenant's file is closing: the engine completes the jobs of that DRM client
	// the kernel still has queued with -ECANCELED instead of running them.
	void cancel_client(uint64_t client_id);

private:
	void record_fault(const EngineJobFault &f);
	bool cancelled(uint64_t client_id);

	std::string path_;
	std::unique_ptr<KmdDevice> device_;
	DeviceInfo info_;
	std::mutex faults_mutex_; // guards faults_ and cancelled_
	// (client id, core, job seq) -> report; bounded (the oldest dropped first) so
	// reports nobody collects (a tenant that left) cannot grow it.
	std::map<std::tuple<uint64_t, uint32_t, uint64_t>, EngineJobFault> faults_;
	std::set<uint64_t> cancelled_; // client ids (never reused by DRM); bounded
	std::unique_ptr<KmdContext> collectives_; // collective_context(), or null
	std::unique_ptr<KmdEngine> engine_; // last: its workers call record_fault
};

class KmdBackend final : public backend::DeviceBackend {
public:
	// Opens up to 16 of `nodes`. Throws (kmd::Error, std::runtime_error) with the
	// reason the driver cannot be used.
	KmdBackend(const std::vector<Node> &nodes, backend::EngineSettings settings);
	~KmdBackend() override;

	const char *name() const override { return "kmd"; }
	// A program's nodes are ordinary commands once bound (sched/engine.cpp
	// materialises each), so replays run as compute jobs like any command; a tile
	// kernel's steps too, its program and saved state in a BO of the command
	// (kernel_job.h).
	backend::DeviceInfo describe(uint32_t device) const override;
	std::shared_ptr<backend::TenantContext> open_tenant(uint64_t tenant_id, pid_t pid) override;
	// Moves members' bytes by the device's DMA and compute jobs (kmd_collective_mover.h).
	std::unique_ptr<backend::CollectiveMover> collective_mover() override;
	// Restart survival (daemon/README.md "kmd."): tenants' driver files are kept
	// with the supervisor (their BOs live as long as the file), and adopted on
	// the kept files. The compute engine is neurond itself: the driver fails the
	// jobs of the engine that died (engine eras), the new one attaches at start.
	std::shared_ptr<backend::TenantContext> adopt_tenant(uint64_t tenant_id, pid_t pid,
							     std::vector<int> kept_files) override;
	std::string restart_unsupported() const override { return {}; }
	void stop() override;
	// The driver's job timeout resets the device's cores (its watchdog); neurond's is off.
	bool resets_cores() const override { return false; }
	std::string fault_injection_refusal() const override;

	KmdDeviceSlot &slot(uint32_t device) { return *devices_.at(device); }
	// What the driver said at start (for the daemon's log).
	const DeviceInfo &info(uint32_t device) const { return devices_.at(device)->info(); }

private:
	std::unique_ptr<sched::TileRunner> make_runner(uint32_t device, int core) override;
	// A core left a pool: tenants of that pool lose it from their kernel core mask.
	void switched(uint32_t device, uint32_t core) override;
	bool place_core_threads(uint32_t device, const std::vector<std::vector<int>> &core_cpus) override;

	std::vector<std::unique_ptr<KmdDeviceSlot>> devices_;
	uint64_t next_tenant_key_ = 1;
	backend::WeakDirectory<KmdTenant> tenants_; // live tenants, for switched()
};

} // namespace neuron::kmd
