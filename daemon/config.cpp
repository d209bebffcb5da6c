#include "config.h"

#include <chip/profile.h>
#include <sched/fault_injection.h>

#include <CLI/CLI.hpp>

#include <iostream>

namespace neuron::daemon {

bool parse_config(int argc, char **argv, Config *c, int *exit_code)
{
	CLI::App app{"neurond: shares simulated Trainium NeuronCores between tenants"};
	app.set_version_flag("--version", std::string("neurond ") + NEURON_VERSION);
	app.set_config("--config", "", "read settings from this file (key = value, the flags' long names)");
	app.add_option("--socket", c->socket_path,
		       "Unix socket to listen on (default: $NEURON_SOCKET, /run/neuron/neurond.sock as root, "
		       "else a per-user path)");
	app.add_option("--backend", c->backend,
		       "device backend: emu (simulated chip in-process), kmd (/dev/accel/accel* of driver neuron) "
		       "or auto (kmd when such a node opens, else emu)")
		->check(CLI::IsMember({"emu", "kmd", "auto"}));
	app.add_option("--profile", c->profile, "chip profile: " + chip::profile_names())
		->check([](const std::string &p) {
			return chip::find_profile(p) ? std::string() : "unknown profile '" + p + "' (known: " + chip::profile_names() + ")";
		});
	app.add_option("--devices", c->devices, "number of simulated devices")->check(CLI::Range(1, 16));
	app.add_option("--cores", c->cores, "NeuronCores per device (0: the profile's)")->check(CLI::Range(0, 64));
	app.add_option("--hbm-mib", c->hbm_mib, "HBM per device in MiB (0: the profile's)")
		->check(CLI::Range(uint64_t(0), uint64_t(1) << 22));
	app.add_option("--threads-per-core", c->threads_per_core,
		       "host threads one command may use (0: the host's CPU count)")->check(CLI::Range(0, 1024));
	app.add_option("--spin-us", c->spin_us, "how long an idle engine polls before it sleeps")
		->check(CLI::Range(0, 100000));
	app.add_option("--training-nice", c->training_nice,
		       "nice value of an engine thread while it runs training tiles beside inference (0: off, the "
		       "default); a waking inference thread then preempts it at once")
		->check(CLI::Range(0, 19));
	app.add_option("--pin-cores", c->pin_cores,
		       "auto (the default): when the host has a CPU for every engine thread, each core's engine threads "
		       "run on CPUs of their own, as each NeuronCore is its own silicon; off: the host scheduler places them")
		->check(CLI::IsMember({"auto", "off"}));
	app.add_option("--log-level", c->log_level, "debug, info, warn or error")
		->check(CLI::IsMember({"debug", "info", "warn", "error"}));
	app.add_option("--socket-group", c->socket_group, "group that may connect (socket mode 0660)");
	app.add_option("--admin-group", c->admin_group, "group whose members may make admin calls (besides root)");
	app.add_option("--inference-cores", c->inference_cores,
		       "cores per device homed in the inference pool (-1: half); the rest are training's")
		->check(CLI::Range(-1, 64));
	app.add_option("--inference-min", c->inference_min, "cores per device the inference pool never lends below");
	app.add_option("--inference-max", c->inference_max, "most cores per device the inference pool holds (0: all)");
	app.add_option("--training-min", c->training_min, "cores per device the training pool never lends below");
	app.add_option("--training-max", c->training_max, "most cores per device the training pool holds (0: all)");
	app.add_option("--policy", c->policy, "capacity policy: manual, scheduled or auto")
		->check(CLI::IsMember({"manual", "scheduled", "auto"}));
	app.add_option("--schedule", c->schedule,
		       "scheduled policy windows, e.g. 00:00-06:00 or 22:00-06:00/2 (inference cores lent to training)");
	app.add_option("--auto-reclaim-depth", c->auto_reclaim_depth, "auto policy: reclaim at this inference queue depth");
	app.add_option("--auto-lend-depth", c->auto_lend_depth, "auto policy: lend at or below this inference queue depth");
	app.add_option("--auto-reclaim-p99-us", c->auto_reclaim_p99_us, "auto policy: reclaim past this inference p99 (0: off)");
	app.add_option("--auto-lend-p99-us", c->auto_lend_p99_us, "auto policy: lend only at or below this p99 (0: off)");
	app.add_option("--auto-hold-ms", c->auto_hold_ms, "auto policy: how long load must stay low before lending");
	app.add_option("--reclaim-deadline-ms", c->reclaim_deadline_ms, "default deadline of a reclaim")
		->check(CLI::Range(1u, 60000u));
	app.add_option("--tile-macs", c->tile_macs, "matmul multiply-adds per tile and host thread (preemption granularity)")
		->check(CLI::Range(uint64_t(1) << 10, uint64_t(1) << 40));
	app.add_option("--tile-elements", c->tile_elements, "elements per elementwise/reduction tile and host thread")
		->check(CLI::Range(uint64_t(1) << 8, uint64_t(1) << 40));
	app.add_option("--limit", c->limits,
		       "per-tenant limit SCOPE.RESOURCE=VALUE, repeatable: scope default, training, inference, group:NAME "
		       "or uid:N; resource hbm_bytes, host_buffers, host_bytes or queues; value N, N[KMGT], N% or "
		       "unlimited (e.g. training.hbm_bytes=75%)");
	app.add_option("--core-watchdog-ms", c->core_watchdog_ms,
		       "reset a NeuronCore whose running tile group makes no progress for this long; only the command on "
		       "it faults (NEURON_FAULT_RESET, event core.reset). 0: never. emu only: on kmd the driver's job "
		       "timeout is the watchdog")
		->check(CLI::Range(0u, 3600000u));
	app.add_flag("--supervise", c->supervise,
		     "run as a supervisor that keeps neurond's state (device memory, rings, host buffers, tenant table) "
		     "and the socket, and restarts neurond when it dies: tenants carry on (for hosts without systemd; "
		     "SIGHUP restarts neurond, SIGTERM stops both)");
	app.add_flag("--keep-state", c->keep_state,
		     "keep tenants' state in memfds with the supervisor (systemd's fd store: the unit needs "
		     "FileDescriptorStoreMax=; implied under --supervise) so a restarted neurond adopts it");
	app.add_option("--reattach-grace-ms", c->reattach_grace_ms,
		       "after a restart: how long a tenant whose process lives has to re-attach before its memory and queues are freed (one whose process exited is freed at once)")
		->check(CLI::Range(100u, 3600000u));
	app.add_flag("--enable-fault-injection", c->enable_fault_injection,
		     "TEST ONLY: accept --inject-fault (without it neurond refuses to start with one)");
	app.add_option("--inject-fault", c->inject_faults,
		       "TEST ONLY (needs --enable-fault-injection; emu backend): make an engine misbehave, repeatable. " +
			       sched::injected_fault_syntax() +
			       ". engine-fault: a command on the core faults; dma-error: a DMA copy fails; slow-core: the "
			       "core runs F times slower; stuck-core: a command stops making progress until the watchdog "
			       "resets the core. after=N lets N commands start on that engine first; count=N (default 1)")
		->check([](const std::string &spec) {
			sched::InjectedFault f;
			return sched::parse_injected_fault(spec, &f);
		});
	try {
		app.parse(argc, argv);
	} catch (const CLI::ParseError &e) {
		*exit_code = app.exit(e);
		if (*exit_code == 0)
			return false;
		*exit_code = 2;
		return false;
	}
	if (!c->inject_faults.empty() && !c->enable_fault_injection) {
		std::cerr << "neurond: --inject-fault is refused without --enable-fault-injection (fault injection is for "
			     "tests; a production daemon must not be told to fault)\n";
		*exit_code = 2;
		return false;
	}
	*exit_code = -1;
	return true;
}

} // namespace neuron::daemon
