#include "kmd_chip.h"

#include "log.h"

#include <algorithm>

namespace neuron::daemon {

namespace {
constexpr size_t kMaxFaultReports = 1024;
} // namespace

KmdChip::KmdChip(uint32_t index, const kmd::Node &node, int threads_per_job) : index_(index), path_(node.path)
{
	device_ = std::make_unique<kmd::KmdDevice>(node.path);
	info_ = device_->info();
	for (uint32_t c = 0; c < info_.num_cores; ++c)
		counters_.push_back(std::make_unique<chip::CoreCounters>());
	kmd::KmdEngineOptions opt;
	opt.threads_per_job = std::max(threads_per_job, 1);
	// Tenants see the emu backend's address layout: 0 is never a device address.
	opt.address_base = chip::kDeviceAddressBase;
	opt.on_fault = [this](const kmd::EngineJobFault &f) { record_fault(f); };
	opt.cancelled = [this](uint64_t client_id) { return cancelled(client_id); };
	engine_ = std::make_unique<kmd::KmdEngine>(node.path, opt);
	info_ = device_->refresh_info(); // engine_attached now
}

KmdChip::~KmdChip() { stop(); }

void KmdChip::stop()
{
	if (engine_)
		engine_->stop();
}

uint32_t KmdChip::max_cmds_per_job() const { return std::max<uint32_t>(info_.max_cmds_per_job(), 1); }

void KmdChip::record_fault(const kmd::EngineJobFault &f)
{
	std::lock_guard lock(faults_mutex_);
	faults_[{f.client_id, f.core, f.job_seq}] = f;
	while (faults_.size() > kMaxFaultReports)
		faults_.erase(faults_.begin());
}

void KmdChip::cancel_client(uint64_t client_id)
{
	std::lock_guard lock(faults_mutex_);
	cancelled_.insert(client_id);
	while (cancelled_.size() > kMaxFaultReports)
		cancelled_.erase(cancelled_.begin());
}

bool KmdChip::cancelled(uint64_t client_id)
{
	std::lock_guard lock(faults_mutex_);
	return cancelled_.count(client_id) != 0;
}

std::optional<kmd::EngineJobFault> KmdChip::take_fault(uint64_t client_id, uint32_t core, uint64_t job_seq)
{
	std::lock_guard lock(faults_mutex_);
	auto it = faults_.find({client_id, core, job_seq});
	if (it == faults_.end())
		return std::nullopt;
	auto f = it->second;
	faults_.erase(it);
	return f;
}

} // namespace neuron::daemon
