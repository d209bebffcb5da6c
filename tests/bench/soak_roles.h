// The processes of bench-soak (bench_soak.cpp): each tenant and tool is this same
// binary started again with --role ROLE, so that the soak can SIGKILL a tenant
// process as a crash would. A role runs until --until (CLOCK_MONOTONIC ns) and then
// writes what it saw to --out as "key value" lines; a role killed before that writes
// nothing (the parent knows which it killed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::test {
class RawClient;
}

namespace soak {

struct RoleArgs {
	std::string role;      // training, inference, short, victim, tool
	std::string socket;
	std::string out;       // result file
	uint64_t until_ns = 0; // monotonic deadline
	uint32_t seed = 1;
	uint32_t device = 0;
	int rounds = 0;        // short: how many rounds, then exit
};

// Runs the role; the process's exit code.
int run_role(const RoleArgs &a);

// What a role reported (read back by the parent).
struct RoleReport {
	bool present = false;
	uint64_t rounds = 0, wrong = 0, errors = 0, polls = 0;
	std::string error;            // the first error, if any
	std::vector<uint64_t> latency_ns; // inference: one per request
};
RoleReport read_report(const std::string &path);

// A raw connection that says Hello as an observer (a tool: never listed as a tenant).
bool connect_observer(neuron::test::RawClient &c, const std::string &socket);

} // namespace soak
