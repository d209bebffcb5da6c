#include "supervisor.h"

#include "log.h"
#include "unix_listener.h"

#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace neuron::daemon {

namespace {

constexpr int kMaxRestarts = 5;
constexpr auto kRestartWindow = std::chrono::seconds(30);
constexpr size_t kMaxFdsPerMessage = 16;

std::string own_executable()
{
	char buf[4096];
	const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return {};
	std::string exe(buf, size_t(n));
	// After a package upgrade the running binary is gone: restart the new one.
	const std::string deleted = " (deleted)";
	if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0)
		exe.resize(exe.size() - deleted.size());
	return exe;
}

class Supervisor {
public:
	Supervisor(char **argv, const Config &config) : argv_(argv), config_(config) {}
	~Supervisor();
	int run();

private:
	void open_notify_socket();
	pid_t spawn();
	[[noreturn]] void exec_child();
	void receive_notification();
	void handle_message(const std::string &text, std::vector<int> &fds);
	// A child exit: true to restart it, else *code is the supervisor's exit code.
	bool should_restart(int status, int *code);

	char **argv_;
	const Config &config_;
	std::string exe_;
	int listener_ = -1;
	int notify_ = -1;
	std::string notify_name_;
	std::map<std::string, int> store_; // FDNAME -> fd
	pid_t child_ = -1;
	bool stopping_ = false;
	bool restart_requested_ = false;
	std::deque<std::chrono::steady_clock::time_point> restarts_;
};

Supervisor::~Supervisor()
{
	for (const auto &[name, fd] : store_)
		close(fd);
	if (notify_ >= 0)
		close(notify_);
	if (listener_ >= 0) {
		close(listener_);
		unlink(config_.socket_path.c_str());
	}
}

void Supervisor::open_notify_socket()
{
	notify_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (notify_ < 0)
		throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
	notify_name_ = "@neurond-supervise-" + std::to_string(getpid());
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	notify_name_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	addr.sun_path[0] = '\0';
	const socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + notify_name_.size());
	if (bind(notify_, reinterpret_cast<struct sockaddr *>(&addr), len) != 0)
		throw std::runtime_error("cannot bind the supervisor's notify socket: " + std::string(std::strerror(errno)));
	// Credentials on every message: only neurond itself may keep or drop state.
	const int on = 1;
	setsockopt(notify_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
	const int buf = 8 << 20;
	setsockopt(notify_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

void Supervisor::exec_child()
{
	// The socket first, then the kept descriptors, as fds 3.. (sd_listen_fds(3)).
	std::vector<int> fds{listener_};
	std::string names = "neurond.socket";
	for (const auto &[name, fd] : store_) {
		fds.push_back(fd);
		names += ":" + name;
	}
	const int n = static_cast<int>(fds.size());
	// Out of the way first (above every target), then into place.
	std::vector<int> high(fds.size());
	for (int i = 0; i < n; ++i)
		high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3 + n);
	for (int i = 0; i < n; ++i)
		if (high[i] < 0 || dup2(high[i], 3 + i) < 0)
			_exit(127);
	setenv("LISTEN_FDS", std::to_string(n).c_str(), 1);
	setenv("LISTEN_FDNAMES", names.c_str(), 1);
	setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
	setenv("NOTIFY_SOCKET", notify_name_.c_str(), 1);
	setenv("NEURON_SUPERVISED", "1", 1);
	// Without its supervisor nothing would keep its state: stop with it.
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, nullptr);
	execv(exe_.c_str(), argv_);
	_exit(127);
}

pid_t Supervisor::spawn()
{
	const pid_t pid = fork();
	if (pid < 0)
		throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
	if (pid == 0)
		exec_child();
	NLOG_INFO("supervise.start", "pid=" + std::to_string(pid) + " kept_fds=" + std::to_string(store_.size()));
	return pid;
}

void Supervisor::handle_message(const std::string &text, std::vector<int> &fds)
{
	std::map<std::string, std::string> kv;
	size_t pos = 0;
	while (pos < text.size()) {
		size_t end = text.find('\n', pos);
		if (end == std::string::npos)
			end = text.size();
		const std::string line = text.substr(pos, end - pos);
		if (auto eq = line.find('='); eq != std::string::npos)
			kv[line.substr(0, eq)] = line.substr(eq + 1);
		pos = end + 1;
	}
	const std::string name = kv.count("FDNAME") ? kv["FDNAME"] : "stored";
	if (kv["FDSTORE"] == "1" && fds.size() == 1) {
		if (auto it = store_.find(name); it != store_.end())
			close(it->second);
		store_[name] = fds.front();
		fds.clear();
	} else if (kv["FDSTOREREMOVE"] == "1") {
		if (auto it = store_.find(name); it != store_.end()) {
			close(it->second);
			store_.erase(it);
		}
	} else if (kv["READY"] == "1") {
		NLOG_INFO("supervise.ready", "pid=" + std::to_string(child_) + " kept_fds=" + std::to_string(store_.size()));
	}
}

void Supervisor::receive_notification()
{
	for (;;) {
		char data[4096];
		struct iovec iov = {data, sizeof(data)};
		alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
		struct msghdr msg = {};
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = control;
		msg.msg_controllen = sizeof(control);
		const ssize_t n = recvmsg(notify_, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0)
			return; // EAGAIN: drained
		pid_t sender = -1;
		std::vector<int> fds;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
				struct ucred cred;
				std::memcpy(&cred, CMSG_DATA(c), sizeof(cred));
				sender = cred.pid;
			} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				for (size_t i = 0; i < count; ++i) {
					int fd;
					std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
					fds.push_back(fd);
				}
			}
		}
		// Only neurond's own process (NotifyAccess=main, as systemd).
		if (sender == child_ && child_ > 0 && !(msg.msg_flags & MSG_CTRUNC))
			handle_message(std::string(data, size_t(n)), fds);
		for (int fd : fds)
			close(fd);
	}
}

bool Supervisor::should_restart(int status, int *code)
{
	const bool crashed = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2);
	const std::string how = WIFSIGNALED(status) ? "signal=" + std::to_string(WTERMSIG(status))
						    : "exit=" + std::to_string(WEXITSTATUS(status));
	if (stopping_ || (!crashed && !restart_requested_)) {
		*code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		NLOG_INFO("supervise.exit", "pid=" + std::to_string(child_) + " " + how);
		return false;
	}
	const auto now = std::chrono::steady_clock::now();
	while (!restarts_.empty() && now - restarts_.front() > kRestartWindow)
		restarts_.pop_front();
	if (!restart_requested_ && restarts_.size() >= kMaxRestarts) {
		NLOG_ERROR("supervise.give_up", "pid=" + std::to_string(child_) + " " + how + " reason=\"neurond died " +
							std::to_string(kMaxRestarts) + " times in 30 s; not restarting it\"");
		*code = 1;
		return false;
	}
	restarts_.push_back(now);
	NLOG_WARN("supervise.restart", "pid=" + std::to_string(child_) + " " + how +
					       (restart_requested_ ? " reason=sighup" : " reason=crash") +
					       " kept_fds=" + std::to_string(store_.size()));
	restart_requested_ = false;
	return true;
}

int Supervisor::run()
{
	exe_ = own_executable();
	if (exe_.empty())
		throw std::runtime_error("cannot find neurond's own executable (/proc/self/exe)");
	listener_ = bind_unix_listener(config_.socket_path, config_.socket_group);
	open_notify_socket();
	sigset_t mask;
	sigemptyset(&mask);
	for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
		sigaddset(&mask, s);
	sigprocmask(SIG_BLOCK, &mask, nullptr);
	const int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
	NLOG_INFO("supervise.listen", "socket=" + config_.socket_path + " exe=" + exe_);
	child_ = spawn();
	for (;;) {
		struct pollfd p[2] = {{notify_, POLLIN, 0}, {sigfd, POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		// Notifications first: a descriptor kept just before neurond died must be in
		// the store when it restarts.
		receive_notification();
		struct signalfd_siginfo si;
		while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
				stopping_ = true;
				kill(child_, static_cast<int>(si.ssi_signo));
			} else if (si.ssi_signo == SIGHUP) {
				restart_requested_ = true;
				kill(child_, SIGKILL);
			}
		}
		int status = 0;
		if (waitpid(child_, &status, WNOHANG) != child_)
			continue;
		receive_notification();
		int code = 0;
		if (!should_restart(status, &code)) {
			close(sigfd);
			return code;
		}
		child_ = spawn();
	}
	close(sigfd);
	return 1;
}

} // namespace

int run_supervisor(char **argv, const Config &config)
{
	Supervisor s(argv, config);
	return s.run();
}

} // namespace neuron::daemon
