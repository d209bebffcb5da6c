#include "config.h"

#include "../runtime/chip/profile.h"

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
	app.add_option("--log-level", c->log_level, "debug, info, warn or error")
		->check(CLI::IsMember({"debug", "info", "warn", "error"}));
	app.add_option("--socket-group", c->socket_group, "group that may connect (socket mode 0660)");
	try {
		app.parse(argc, argv);
	} catch (const CLI::ParseError &e) {
		*exit_code = app.exit(e);
		if (*exit_code == 0)
			return false;
		*exit_code = 2;
		return false;
	}
	*exit_code = -1;
	return true;
}

} // namespace neuron::daemon
