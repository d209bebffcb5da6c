// Helpers of the restart suites (test_restart*.cpp): neurond under its own
// supervisor (--supervise), killed with SIGKILL and restarted by it.
#pragma once

#include "daemon_test.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

namespace dt {

inline void supervised_up() { daemon_up_with({"--supervise"}); }

// The neurond the supervisor runs now (its only child), or -1.
inline pid_t neurond_child()
{
	const pid_t sup = g_daemon->pid();
	std::ifstream f("/proc/" + std::to_string(sup) + "/task/" + std::to_string(sup) + "/children");
	pid_t pid = -1;
	return f >> pid ? pid : -1;
}

// A neurond child that is up (it listens through the supervisor's socket, so
// only its log says it adopted the state and runs).
inline pid_t wait_child(pid_t not_this, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		const pid_t pid = neurond_child();
		if (pid > 0 && pid != not_this)
			return pid;
		sleep_ms(10);
	}
	return -1;
}

// kill -9 of neurond (not of its supervisor); returns once a new one runs.
inline void kill_neurond()
{
	const pid_t victim = wait_child(-1, 10000);
	cr_assert(victim > 0, "no neurond under the supervisor\n%s", g_daemon->log_tail().c_str());
	cr_assert(kill(victim, SIGKILL) == 0, "kill: %s", std::strerror(errno));
	const pid_t next = wait_child(victim, 10000);
	cr_assert(next > 0, "the supervisor did not restart neurond\n%s", g_daemon->log_tail().c_str());
}

// The log's lines that hold any of `needles` (the last 40), for a failure message
// that must show what the supervisor and neurond said across restarts.
inline std::string lines_in_log(std::initializer_list<const char *> needles)
{
	const std::string log = g_daemon->log();
	std::vector<std::string> hits;
	for (size_t at = 0; at < log.size();) {
		size_t end = log.find('\n', at);
		if (end == std::string::npos)
			end = log.size();
		const std::string line = log.substr(at, end - at);
		for (const char *n : needles)
			if (line.find(n) != std::string::npos) {
				hits.push_back(line);
				break;
			}
		at = end + 1;
	}
	std::string out;
	for (size_t i = hits.size() > 40 ? hits.size() - 40 : 0; i < hits.size(); ++i)
		out += "| " + hits[i] + "\n"; // "| ": the QEMU suite's output filter keeps it
	return out;
}

inline size_t count_in_log(const std::string &what)
{
	const std::string log = g_daemon->log();
	size_t n = 0;
	for (size_t p = log.find(what); p != std::string::npos; p = log.find(what, p + 1))
		++n;
	return n;
}

} // namespace dt
