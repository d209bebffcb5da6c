#include "chip_set.h"

#include "log.h"

#include <algorithm>
#include <cblas.h>
#include <stdexcept>
#include <thread>

namespace neuron::daemon {

namespace {

std::string join_lines(const std::vector<std::string> &v)
{
	std::string out;
	for (const auto &s : v)
		out += (out.empty() ? "" : "; ") + s;
	return out;
}

} // namespace

ChipSet::ChipSet(const Config &config)
{
	if (config.backend == "emu") {
		build_emu(config);
		NLOG_INFO("backend", "backend=emu reason=\"--backend emu\"");
		return;
	}
	std::vector<std::string> skipped;
	const auto nodes = kmd::discover(&skipped);
	const std::string why_none = "no /dev/accel/accel* node of driver neuron could be opened" +
				     (skipped.empty() ? std::string() : " (" + join_lines(skipped) + ")");
	if (config.backend == "kmd") {
		if (nodes.empty())
			throw std::runtime_error("--backend kmd: " + why_none +
						 "; load the driver (driver/README.md) or run with --backend emu");
		try {
			build_kmd(config, nodes);
		} catch (const std::exception &e) {
			slots_.clear();
			throw std::runtime_error(std::string("--backend kmd: ") + e.what());
		}
		NLOG_INFO("backend", "backend=kmd reason=\"--backend kmd\" devices=" + std::to_string(slots_.size()));
		return;
	}
	// auto
	if (nodes.empty()) {
		build_emu(config);
		NLOG_INFO("backend", "backend=emu reason=\"auto: " + why_none + "\"");
		return;
	}
	try {
		build_kmd(config, nodes);
		NLOG_INFO("backend", "backend=kmd reason=\"auto: " + nodes.front().path + " is driver neuron\" devices=" +
					     std::to_string(slots_.size()));
	} catch (const std::exception &e) {
		slots_.clear();
		build_emu(config);
		NLOG_WARN("backend", "backend=emu reason=\"auto: the neuron driver is present but unusable: " +
					     std::string(e.what()) + "\"");
	}
}

void ChipSet::add_schedulers(DeviceSlot &slot, uint32_t device, uint32_t cores, uint32_t inference)
{
	slot.core_count = cores;
	slot.cores_sched = std::make_unique<chip::CoreScheduler>(device, cores, inference, true);
	slot.cores_sched->on_reclaimed = [this](const chip::ReclaimDone &r) {
		if (reclaim_hook)
			reclaim_hook(r);
	};
	slot.dma_sched = std::make_unique<chip::CoreScheduler>(device, 1, 0, false);
}

void ChipSet::build_kmd(const Config &config, const std::vector<kmd::Node> &nodes)
{
	backend_ = Backend::Kmd;
	const int threads = config.threads_per_core > 0 ? config.threads_per_core
							: static_cast<int>(std::thread::hardware_concurrency());
	openblas_set_num_threads(threads);
	for (size_t i = 0; i < nodes.size() && i < 16; ++i) {
		DeviceSlot slot;
		const auto d = static_cast<uint32_t>(i);
		slot.kmd = std::make_unique<KmdChip>(d, nodes[i], threads);
		const kmd::DeviceInfo &info = slot.kmd->info();
		const uint32_t inference = config.inference_cores < 0
						   ? info.num_cores / 2
						   : std::min<uint32_t>(uint32_t(config.inference_cores), info.num_cores);
		add_schedulers(slot, d, info.num_cores, inference);
		NLOG_INFO("device.up", "device=" + std::to_string(d) + " backend=kmd node=" + nodes[i].path +
					       " profile=" + info.profile_name + " platform=" + info.platform_name +
					       " cores=" + std::to_string(info.num_cores) +
					       " hbm_bytes=" + std::to_string(info.hbm_size) +
					       " job_timeout_ms=" + std::to_string(info.job_timeout_ms) +
					       " threads_per_job=" + std::to_string(threads));
		slots_.push_back(std::move(slot));
	}
	// The driver decides what the devices are; say so when the flags disagree.
	const kmd::DeviceInfo &first = slots_.front().kmd->info();
	if (config.devices != slots_.size() || (config.cores && config.cores != first.num_cores) ||
	    (config.hbm_mib && (config.hbm_mib << 20) != first.hbm_size) || config.profile != first.profile_name)
		NLOG_WARN("backend.settings",
			  "backend=kmd: --devices/--profile/--cores/--hbm-mib do not apply; the driver has " +
				  std::to_string(slots_.size()) + " " + first.profile_name + " device(s) with " +
				  std::to_string(first.num_cores) + " cores and " + std::to_string(first.hbm_size >> 20) +
				  " MiB HBM (set them with neuron.ko's module parameters)");
}

const chip::CoreCounters &ChipSet::core_counters(uint32_t device, uint32_t core)
{
	DeviceSlot &s = slots_.at(device);
	return s.kmd ? s.kmd->core_counters(core) : s.device->core_counters(core);
}

void ChipSet::build_emu(const Config &config)
{
	backend_ = Backend::Emu;
	auto profile = chip::find_profile(config.profile);
	if (!profile)
		throw std::runtime_error("unknown profile " + config.profile);
	if (config.cores)
		profile->cores = config.cores;
	if (config.hbm_mib)
		profile->hbm_bytes = config.hbm_mib << 20;

	chip::EngineOptions options;
	options.threads = config.threads_per_core > 0 ? config.threads_per_core
						      : static_cast<int>(std::thread::hardware_concurrency());
	options.spin_ns = config.spin_us * 1000;
	options.tile_budget.matmul_macs = config.tile_macs;
	options.tile_budget.elements = config.tile_elements;
	options.tile_budget.transcendental_elements = std::max<uint64_t>(config.tile_elements / 4, 1);
	options.on_fault = [this](const chip::Queue &q, uint32_t code, uint64_t seq, const std::string &reason) {
		NLOG_WARN("queue.fault", "queue=" + std::to_string(q.id()) + " device=" + std::to_string(q.device()) +
						 " core=" + std::to_string(q.core()) + " code=" + std::to_string(code) +
						 " seq=" + std::to_string(seq) + " reason=\"" + reason + "\"");
		if (fault_hook)
			fault_hook(q, code, seq, reason);
	};
	chip::EngineOptions dma_options = options;
	dma_options.tiling = false; // copies are not shared by priority; keep them whole and fast
	const uint32_t inference = config.inference_cores < 0 ? profile->cores / 2
							       : std::min<uint32_t>(uint32_t(config.inference_cores), profile->cores);
	// BLAS keeps one global pool: size it to one command's thread budget.
	openblas_set_num_threads(options.threads);

	for (uint32_t d = 0; d < config.devices; ++d) {
		DeviceSlot slot;
		slot.device = std::make_unique<chip::Device>(d, *profile);
		add_schedulers(slot, d, profile->cores, inference);
		for (uint32_t c = 0; c < profile->cores; ++c)
			slot.cores.push_back(std::make_unique<chip::Engine>(*slot.device, static_cast<int>(c),
									    *slot.cores_sched, c, options));
		slot.dma = std::make_unique<chip::Engine>(*slot.device, -1, *slot.dma_sched, 0, dma_options);
		slots_.push_back(std::move(slot));
		NLOG_INFO("device.up", "device=" + std::to_string(d) + " profile=" + profile->name +
					       " cores=" + std::to_string(profile->cores) +
					       " hbm_bytes=" + std::to_string(profile->hbm_bytes) +
					       " threads_per_core=" + std::to_string(options.threads) +
					       " inference_cores=" + std::to_string(inference));
	}
}

ChipSet::~ChipSet() { stop(); }

void ChipSet::stop()
{
	for (auto &s : slots_) {
		for (auto &e : s.cores)
			e->stop();
		if (s.dma)
			s.dma->stop();
		if (s.kmd)
			s.kmd->stop();
	}
}

} // namespace neuron::daemon
