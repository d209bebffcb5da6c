// One device of the kmd backend: a /dev/accel/accelN node of driver "neuron",
// opened as the controller (KmdDevice: device info, per-tenant core masks) and
// attached as its compute engine (KmdEngine: neurond runs the compute jobs the
// kernel schedules, on the op kernels).
//
// Ownership: ChipSet owns it for the daemon's life. `device`, `engine` and
// `info` are set in the constructor and immutable after (KmdDevice's ioctls are
// safe from any thread). The counters are atomics written by the tenants' ring
// pumps. The fault table has its own mutex.
#pragma once

#include <device.h> // chip::CoreCounters
#include <kmd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace neuron::daemon {

class KmdChip {
public:
	// Opens `node` as controller and attaches the engine (threads_per_job host
	// threads per command). Throws kmd::Error (EPERM without CAP_SYS_ADMIN,
	// EBUSY when another engine is attached: another neurond).
	KmdChip(uint32_t index, const kmd::Node &node, int threads_per_job);
	~KmdChip();

	uint32_t index() const { return index_; }
	const std::string &path() const { return path_; }
	kmd::KmdDevice &device() { return *device_; }
	const kmd::DeviceInfo &info() const { return info_; }
	uint32_t cores() const { return info_.num_cores; }
	uint32_t max_cmds_per_job() const;
	void stop(); // detaches the engine

	chip::CoreCounters &core_counters(uint32_t core) { return *counters_.at(core); }
	chip::CoreCounters &dma_counters() { return dma_counters_; }

	// The reason the engine gave for a failed job, if it reported one (the
	// engine reports before it completes the job; kernel-side failures such as
	// timeouts have none). Removes it.
	std::optional<kmd::EngineJobFault> take_fault(uint64_t client_id, uint32_t core, uint64_t job_seq);

	// A tenant's file is closing: the engine completes the jobs of that DRM client
	// the kernel still has queued with -ECANCELED instead of running them.
	void cancel_client(uint64_t client_id);

private:
	void record_fault(const kmd::EngineJobFault &f);

	uint32_t index_;
	std::string path_;
	std::unique_ptr<kmd::KmdDevice> device_;
	kmd::DeviceInfo info_;
	std::vector<std::unique_ptr<chip::CoreCounters>> counters_;
	chip::CoreCounters dma_counters_;
	bool cancelled(uint64_t client_id);

	std::mutex faults_mutex_; // guards faults_ and cancelled_
	// (client id, core, job seq) -> report; bounded (lowest client id, the oldest
	// file, dropped first) so reports
	// nobody collects (a tenant that left) cannot grow it.
	std::map<std::tuple<uint64_t, uint32_t, uint64_t>, kmd::EngineJobFault> faults_;
	std::set<uint64_t> cancelled_; // client ids (never reused by DRM); bounded, lowest dropped
	std::unique_ptr<kmd::KmdEngine> engine_; // last: its workers call record_fault
};

} // namespace neuron::daemon
