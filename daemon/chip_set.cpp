#include "chip_set.h"

#include "log.h"

#include <algorithm>
#include <cblas.h>
#include <stdexcept>
#include <thread>

namespace neuron::daemon {

ChipSet::ChipSet(const Config &config)
{
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
		slot.cores_sched = std::make_unique<chip::CoreScheduler>(d, profile->cores, inference, true);
		slot.cores_sched->on_reclaimed = [this](const chip::ReclaimDone &r) {
			if (reclaim_hook)
				reclaim_hook(r);
		};
		slot.dma_sched = std::make_unique<chip::CoreScheduler>(d, 1, 0, false);
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
	}
}

} // namespace neuron::daemon
