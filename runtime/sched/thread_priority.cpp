#include "thread_priority.h"

#include <fstream>
#include <string>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace neuron::sched {

namespace {

constexpr int kCapSysNice = 23; // linux/capability.h

bool effective_capability(int cap)
{
	std::ifstream status("/proc/self/status");
	std::string line;
	while (std::getline(status, line))
		if (line.rfind("CapEff:", 0) == 0)
			return (std::stoull(line.substr(7), nullptr, 16) >> cap) & 1;
	return false;
}

} // namespace

bool can_restore_priority()
{
	// RLIMIT_NICE's ceiling is 20 - limit: 20 allows nice 0 again.
	struct rlimit r {};
	if (getrlimit(RLIMIT_NICE, &r) == 0 && (r.rlim_cur == RLIM_INFINITY || r.rlim_cur >= 20))
		return true;
	return effective_capability(kCapSysNice);
}

bool set_thread_nice(int n)
{
	thread_local int current = 0; // threads start at the process's nice value, 0 for neurond
	if (n == current)
		return true;
	// PRIO_PROCESS with a thread id sets that thread alone (Linux).
	if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), n) != 0)
		return false;
	current = n;
	return true;
}

} // namespace neuron::sched
