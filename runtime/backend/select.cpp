#include "select.h"

#include <chip/profile.h>
#include <emu/emu_backend.h>
#include <kmd/kmd_backend.h>

#include <stdexcept>

namespace neuron::backend {

namespace {

std::string join(const std::vector<std::string> &v)
{
	std::string out;
	for (const auto &s : v)
		out += (out.empty() ? "" : "; ") + s;
	return out;
}

std::unique_ptr<DeviceBackend> make_emu(const BackendOptions &o)
{
	auto profile = chip::find_profile(o.profile);
	if (!profile)
		throw std::runtime_error("unknown profile " + o.profile + " (known: " + chip::profile_names() + ")");
	if (o.cores)
		profile->cores = o.cores;
	if (o.hbm_mib)
		profile->hbm_bytes = o.hbm_mib << 20;
	return std::make_unique<emu::EmuBackend>(*profile, o.devices, o.engines, o.keep_hbm, o.kept_hbm);
}

// With kmd the driver decides what the devices are: say so when the options disagree.
std::string kmd_mismatch(const DeviceBackend &b, const BackendOptions &o)
{
	if (b.device_count() == 0)
		return {};
	const DeviceInfo first = b.describe(0);
	if (o.devices == b.device_count() && (!o.cores || o.cores == first.cores) &&
	    (!o.hbm_mib || (o.hbm_mib << 20) == first.hbm_bytes) && o.profile == first.profile)
		return {};
	return "--devices/--profile/--cores/--hbm-mib do not apply; the driver has " + std::to_string(b.device_count()) +
	       " " + first.profile + " device(s) with " + std::to_string(first.cores) + " cores and " +
	       std::to_string(first.hbm_bytes >> 20) + " MiB HBM (set them with neuron.ko's module parameters)";
}

Selected with_kmd(std::unique_ptr<DeviceBackend> b, std::string reason, const BackendOptions &o)
{
	Selected s{std::move(b), std::move(reason), {}};
	s.warning = kmd_mismatch(*s.backend, o);
	return s;
}

} // namespace

namespace {

Selected choose_backend(const BackendOptions &o);

} // namespace

// Fault injection is refused by a backend that cannot emulate it (kmd), never
// silently ignored.
Selected open_backend(const BackendOptions &o)
{
	Selected s = choose_backend(o);
	if (!o.engines.faults.empty()) {
		if (auto why = s.backend->fault_injection_refusal(); !why.empty())
			throw std::runtime_error("--inject-fault: " + why + " (backend chosen: " + s.reason + ")");
		for (const auto &f : o.engines.faults) {
			if (f.device >= s.backend->device_count())
				throw std::runtime_error("--inject-fault " + f.spec + ": there is no device " + std::to_string(f.device) +
							 " (" + std::to_string(s.backend->device_count()) + " devices)");
			if (f.kind == sched::InjectedFault::Kind::StuckCore && o.engines.watchdog_ms == 0)
				throw std::runtime_error("--inject-fault " + f.spec + ": a stuck core is only ever freed by the "
							 "watchdog; --core-watchdog-ms 0 turns it off");
			if (!f.on_dma_engine() && f.core >= s.backend->core_count(f.device))
				throw std::runtime_error("--inject-fault " + f.spec + ": device " + std::to_string(f.device) +
							 " has no core " + std::to_string(f.core) + " (" +
							 std::to_string(s.backend->core_count(f.device)) + " cores)");
		}
	}
	return s;
}

namespace {

Selected choose_backend(const BackendOptions &o)
{
	if (o.kind == "emu")
		return {make_emu(o), "--backend emu", {}};
	if (o.kind != "kmd" && o.kind != "auto")
		throw std::runtime_error("unknown backend " + o.kind + " (emu, kmd or auto)");
	std::vector<std::string> skipped;
	const auto nodes = kmd::discover(&skipped);
	const std::string why_none = "no /dev/accel/accel* node of driver neuron could be opened" +
				     (skipped.empty() ? std::string() : " (" + join(skipped) + ")");
	if (o.kind == "kmd") {
		if (nodes.empty())
			throw std::runtime_error("--backend kmd: " + why_none +
						 "; load the driver (driver/README.md) or run with --backend emu");
		try {
			return with_kmd(std::make_unique<kmd::KmdBackend>(nodes, o.engines), "--backend kmd", o);
		} catch (const std::exception &e) {
			throw std::runtime_error(std::string("--backend kmd: ") + e.what());
		}
	}
	if (nodes.empty())
		return {make_emu(o), "auto: " + why_none, {}};
	try {
		return with_kmd(std::make_unique<kmd::KmdBackend>(nodes, o.engines),
				"auto: " + nodes.front().path + " is driver neuron", o);
	} catch (const std::exception &e) {
		return {make_emu(o), std::string("auto: the neuron driver is present but unusable: ") + e.what(), {}};
	}
}

} // namespace

} // namespace neuron::backend
