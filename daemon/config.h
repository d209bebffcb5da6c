// neurond's settings: command-line flags, each also settable in the config file
// (INI/TOML "key = value" lines with the flag's long name; flags win).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::daemon {

struct Config {
	std::string socket_path;      // empty: detail::default_socket_path()
	// Device backend (DESIGN.md section 1): "emu" (the simulated chip in-process),
	// "kmd" (/dev/accel/accelN of driver neuron) or "auto" (kmd when a neuron node
	// opens, else emu). With kmd, devices, cores and HBM come from the driver.
	std::string backend = "emu";
	std::string profile = "trn2";
	uint32_t devices = 1;
	uint32_t cores = 0;           // 0: the profile's
	uint64_t hbm_mib = 0;         // 0: the profile's
	int threads_per_core = 0;     // 0: the host's CPU count
	uint64_t spin_us = 50;
	int training_nice = 0;
	std::string pin_cores = "auto"; // auto: each core's engine threads on CPUs of their own when there are enough; off
	std::string log_level = "info";
	std::string socket_group = "neuron";
	std::string admin_group = "neuron-admin";

	// Capacity sharing (DESIGN.md section 3). Pool sizes are per device.
	int inference_cores = -1;     // cores homed in the inference pool; -1: half (rounded down)
	uint32_t inference_min = 0;   // guaranteed minimum held by each pool (never lent below)
	uint32_t inference_max = 0;   // maximum held (never borrows above); 0: all cores
	uint32_t training_min = 0;
	uint32_t training_max = 0;
	std::string policy = "manual";           // manual, scheduled, auto
	std::string schedule;                    // "HH:MM-HH:MM[/cores],..." inference cores lent to training
	uint64_t auto_reclaim_depth = 4;         // auto: reclaim at this inference queue depth ...
	uint64_t auto_lend_depth = 0;            // ... lend at or below this depth ...
	uint64_t auto_reclaim_p99_us = 0;        // ... or reclaim past this p99 (0: ignore) ...
	uint64_t auto_lend_p99_us = 0;           // ... and lend only at or below this p99 (0: ignore)
	uint32_t auto_hold_ms = 1000;            // ... for this long (hysteresis)
	uint32_t reclaim_deadline_ms = 100;      // default reclaim deadline
	uint64_t tile_macs = 1ull << 24;         // matmul multiply-adds per tile and host thread
	uint64_t tile_elements = 1ull << 19;     // elements per elementwise/reduction tile and host thread

	// Per-tenant limits (tenant_limits.h): "SCOPE.RESOURCE=VALUE" entries.
	std::vector<std::string> limits;

	// Restart survival (README "Restart with tenants alive"). supervise: run as the
	// supervisor (supervisor.h) that keeps neurond's state and restarts it.
	// keep_state: keep the state in memfds with the supervisor (systemd's fd store
	// or --supervise's; on by itself under --supervise). reattach_grace_ms: how
	// long adopted tenants have to re-attach before their memory is freed.
	bool supervise = false;
	bool keep_state = false;
	uint32_t reattach_grace_ms = 600000;

	// A core whose tile group makes no progress this long is reset (0: never).
	uint32_t core_watchdog_ms = 10000;
	// Test only: faults to inject (runtime/sched/fault_injection.h), refused unless
	// enable_fault_injection is set too, so a production daemon cannot be told to
	// fault by one stray line.
	bool enable_fault_injection = false;
	std::vector<std::string> inject_faults;
};

// Parses argv; on --help/--version prints and returns *exit_code >= 0; on a bad
// flag or config file prints what was wrong and sets *exit_code = 2.
bool parse_config(int argc, char **argv, Config *config, int *exit_code);

} // namespace neuron::daemon
