// neurond: the Neuron runtime daemon. Drives the devices through a backend (the
// simulated chip in process, or neuron.ko) and serves tenants over a Unix socket
// until SIGTERM or SIGINT.
#include "config.h"
#include "fd_store.h"
#include "listen_fds.h"
#include "log.h"
#include "sd_notify.h"
#include "text.h"
#include "server.h"
#include "state_journal.h"
#include "supervisor.h"

#include <neuron/socket_path.h>

#include <backend/select.h>
#include <kernels/blas_select.h>
#include <sched/fault_injection.h>
#include <sched/thread_priority.h>

#include <cblas.h>
#include <thread>

#include <utility> // before Asio: Boost 1.74 awaitable.hpp uses std::exchange without it
#include <boost/asio.hpp>

#include <csignal>
#include <cstdlib>
#include <memory>
#include <sys/resource.h>
#include <exception>
#include <iostream>
#include <stdexcept>

using namespace neuron;
using namespace neuron::daemon;

namespace {

backend::BackendOptions backend_options(const Config &config, FdStore &store)
{
	backend::BackendOptions o;
	// Restart survival: device memory in memfds kept with the supervisor.
	o.keep_hbm = store.enabled();
	for (uint32_t d = 0; store.enabled() && d < config.devices; ++d)
		o.kept_hbm.push_back(store.take("hbm." + std::to_string(d)));
	o.kind = config.backend;
	o.profile = config.profile;
	o.devices = config.devices;
	o.cores = config.cores;
	o.hbm_mib = config.hbm_mib;
	o.engines.threads = config.threads_per_core > 0 ? config.threads_per_core
							: static_cast<int>(std::thread::hardware_concurrency());
	o.engines.spin_ns = config.spin_us * 1000;
	o.engines.training_nice = config.training_nice;
	o.engines.pin_cores = config.pin_cores == "auto";
	o.engines.tile_budget.matmul_macs = config.tile_macs;
	o.engines.tile_budget.elements = config.tile_elements;
	o.engines.tile_budget.transcendental_elements = std::max<uint64_t>(config.tile_elements / 4, 1);
	o.engines.watchdog_ms = config.core_watchdog_ms;
	for (const auto &spec : config.inject_faults) {
		sched::InjectedFault f;
		sched::parse_injected_fault(spec, &f); // checked by parse_config
		o.engines.faults.push_back(std::move(f));
	}
	return o;
}

// One line for the choice (and what of the options does not apply to it), one per
// device.
void log_backend(const backend::DeviceBackend &devices, const backend::Selected &selected)
{
	NLOG_INFO("backend", std::string("backend=") + devices.name() + " reason=" + quoted(selected.reason) + " devices=" +
				     std::to_string(devices.device_count()));
	if (!selected.warning.empty())
		NLOG_WARN("backend.settings", std::string("backend=") + devices.name() + ": " + selected.warning);
	for (uint32_t d = 0; d < devices.device_count(); ++d) {
		const backend::DeviceInfo i = devices.describe(d);
		NLOG_INFO("device.up", "device=" + std::to_string(d) + " backend=" + devices.name() + " node=" + i.node +
					       " profile=" + i.profile + " cores=" + std::to_string(i.cores) +
					       " hbm_bytes=" + std::to_string(i.hbm_bytes));
	}
}

// Restart survival: each device's memory kept with the supervisor (a new memfd is
// handed over; a kept one is already there), or why this backend cannot keep it.
bool keep_device_memory(backend::DeviceBackend &devices, FdStore &store, const std::vector<int> &kept)
{
	if (auto why = devices.restart_unsupported(); !why.empty()) {
		NLOG_WARN("state.off", "backend=" + std::string(devices.name()) + " reason=" + quoted(why));
		return false;
	}
	for (uint32_t d = 0; d < devices.device_count(); ++d) {
		// Kept already, or none to keep (kmd: device memory lies in the driver,
		// held by the tenants' kept files).
		if ((d < kept.size() && kept[d] >= 0) || devices.kept_memory_fd(d) < 0)
			continue;
		if (auto err = store.store("hbm." + std::to_string(d), devices.kept_memory_fd(d)); !err.empty())
			throw std::runtime_error("cannot keep device " + std::to_string(d) + "'s memory with the supervisor: " + err);
	}
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	Config config;
	int exit_code = 0;
	if (!parse_config(argc, argv, &config, &exit_code))
		return exit_code;
	if (const std::string bad = kernels::isa_cap_error(); !bad.empty()) {
		std::cerr << "neurond: " << bad << "\n";
		return 2;
	}
	LogLevel level = LogLevel::Info;
	parse_log_level(config.log_level, &level);
	set_log_level(level);
	if (config.socket_path.empty())
		config.socket_path = neuron::detail::default_socket_path(neuron::detail::SocketRole::Daemon);
	// A tenant that vanishes mid-reply must not kill the daemon.
	std::signal(SIGPIPE, SIG_IGN);
	// Each tenant costs a socket and a ring memfd or more: take every descriptor the
	// hard limit allows (the soft default of 1024 would cap it near 500 tenants).
	if (struct rlimit r; getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}

	const bool supervised = std::getenv("NEURON_SUPERVISED") != nullptr;
	if (config.supervise && !supervised) {
		try {
			return run_supervisor(argv, config);
		} catch (const std::exception &e) {
			NLOG_ERROR("supervise.fatal", "error=" + quoted(e.what()));
			std::cerr << "neurond --supervise: " << e.what() << "\n";
			return 1;
		}
	}

	try {
		// Restart survival: the descriptors the earlier neurond kept (fd_store.h).
		FdStore store(config.keep_state || supervised);
		// Before the devices: a second daemon must not take the devices (the
		// driver's compute engine) from the first only to find the socket taken.
		// (Not when systemd passed the socket: it is alive because it is ours.)
		if (inherited_unix_listener(config.socket_path) < 0 && socket_alive(config.socket_path))
			throw std::runtime_error("another neurond is already listening on " + config.socket_path);
		backend::BackendOptions options = backend_options(config, store);
		if (options.engines.training_nice != 0 && !sched::can_restore_priority()) {
			NLOG_WARN("engines.priority", "training_nice=off reason=\"no CAP_SYS_NICE or RLIMIT_NICE: an engine niced "
						      "for training could not run inference at normal priority again\"");
			options.engines.training_nice = 0;
		}
		// Before any thread starts: choosing the BLAS kernels briefly sets an
		// environment variable (kernels/blas_select.h).
		NLOG_INFO("blas", "blas=" + quoted(kernels::blas_description()));
		// BLAS keeps one global pool: size it to one command's thread budget.
		openblas_set_num_threads(options.engines.threads);
		backend::Selected selected = backend::open_backend(options);
		backend::DeviceBackend &devices = *selected.backend;
		log_backend(devices, selected);
		for (const auto &spec : config.inject_faults)
			NLOG_WARN("fault.armed", "inject_fault=" + quoted(spec) + " (test only: --enable-fault-injection)");
		boost::asio::io_context io;
		// Before the socket listens: a client may stop us the moment it can
		// connect, and asio queues a signal that comes before the wait below.
		boost::asio::signal_set signals(io, SIGTERM, SIGINT);
		// Before the server: its tenants' queues hand their progress records back
		// to it when they go, which may be as late as the server's destruction.
		std::unique_ptr<StateJournal> journal;
		Server server(io, devices, config);
		if (store.enabled() && keep_device_memory(devices, store, options.kept_hbm)) {
			journal = std::make_unique<StateJournal>(store);
			server.keep_state(store, *journal);
			const size_t adopted = server.adopt_state();
			NLOG_INFO("state.kept", "adopted_tenants=" + std::to_string(adopted));
		}
		// Whatever the journal did not name goes; memory no tenant holds is zeroed.
		store.forget_unclaimed();
		if (journal)
			devices.adoption_done();
		devices.start();
		NLOG_INFO("engines.placement", "cores=" + quoted(devices.placement().describe()));
		// Under systemd with kept state, SIGTERM means "the unit stops or restarts":
		// neurond leaves its tenants in the fd store (systemd empties it on a stop
		// and hands it to the next neurond on a restart). Under --supervise, or
		// without kept state, it releases them.
		const bool hand_over = journal && !supervised;
		signals.async_wait([&](const boost::system::error_code &, int sig) {
			if (hand_over) {
				NLOG_INFO("daemon.stop", "signal=" + std::to_string(sig) +
								 " tenants=kept (in the fd store, for the next neurond)");
				sd_notify_state("STOPPING=1");
				devices.stop(); // engines end at a tile boundary; their progress is kept
				std::_Exit(0);  // no destructor may release the tenants
			}
			NLOG_INFO("daemon.stop", "signal=" + std::to_string(sig));
			sd_notify_state("STOPPING=1");
			server.stop();
			io.stop();
		});
		NLOG_INFO("daemon.ready", "version=" NEURON_VERSION " devices=" + std::to_string(devices.device_count()));
		if (std::string err; !sd_notify_state("READY=1", &err))
			NLOG_WARN("daemon.notify_failed", "error=\"" + err + "\"");
		io.run();
		server.stop();
		devices.stop();
		NLOG_INFO("daemon.exit", "status=clean");
	} catch (const std::exception &e) {
		NLOG_ERROR("daemon.fatal", "error=" + quoted(e.what()));
		std::cerr << "neurond: " << e.what() << "\n";
		return 1;
	}
	return 0;
}
