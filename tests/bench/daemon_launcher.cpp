#include "daemon_launcher.h"

#include <neuron/neuron.h>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace bench {

DaemonLauncher::~DaemonLauncher()
{
	if (pid_ > 0) {
		kill(pid_, SIGTERM);
		int status;
		waitpid(pid_, &status, 0);
	}
	if (!dir_.empty()) {
		std::remove((dir_ + "/neurond.log").c_str());
		rmdir(dir_.c_str());
	}
}

std::string DaemonLauncher::start(const std::string &binary, const std::vector<std::string> &args)
{
	char tmpl[] = "/tmp/neuron-bench-XXXXXX";
	if (!mkdtemp(tmpl)) {
		std::perror("mkdtemp");
		return "";
	}
	dir_ = tmpl;
	const std::string socket = dir_ + "/neurond.sock";
	const std::string log = dir_ + "/neurond.log";
	pid_ = fork();
	if (pid_ == 0) {
		int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		std::vector<const char *> argv = {binary.c_str(), "--socket", socket.c_str()};
		for (const auto &a : args)
			argv.push_back(a.c_str());
		argv.push_back(nullptr);
		execv(binary.c_str(), const_cast<char *const *>(argv.data()));
		_exit(127);
	}
	for (int i = 0; i < 500; ++i) {
		neuron_connect_options o = {};
		o.socket_path = socket.c_str();
		o.observer = 1;
		neuron_client *c;
		if (neuron_connect(&o, &c) == NEURON_OK) {
			neuron_disconnect(c);
			return socket;
		}
		int status;
		if (waitpid(pid_, &status, WNOHANG) == pid_) {
			std::fprintf(stderr, "neurond exited during start-up; see its log\n");
			pid_ = -1;
			return "";
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	std::fprintf(stderr, "neurond did not come up on %s within 5 s\n", socket.c_str());
	return "";
}

} // namespace bench
