// neurond's settings: command-line flags, each also settable in the config file
// (INI/TOML "key = value" lines with the flag's long name; flags win).
#pragma once

#include <cstdint>
#include <string>

namespace neuron::daemon {

struct Config {
	std::string socket_path;      // empty: detail::default_socket_path()
	std::string profile = "trn2";
	uint32_t devices = 1;
	uint32_t cores = 0;           // 0: the profile's
	uint64_t hbm_mib = 0;         // 0: the profile's
	int threads_per_core = 0;     // 0: the host's CPU count
	uint64_t spin_us = 50;
	std::string log_level = "info";
	std::string socket_group = "neuron";
};

// Parses argv; on --help/--version prints and returns *exit_code >= 0; on a bad
// flag or config file prints what was wrong and sets *exit_code = 2.
bool parse_config(int argc, char **argv, Config *config, int *exit_code);

} // namespace neuron::daemon
