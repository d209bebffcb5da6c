#include "neurond_process.h"

#include "kmd_module.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <signal.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace neuron::test {

namespace {

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, nullptr);
}

long long now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

void remove_tree(const std::string &dir)
{
	if (dir.empty())
		return;
	// Only what we create lives there: the socket and the log.
	for (const char *name : {"/neurond.sock", "/neurond.log"})
		unlink((dir + name).c_str());
	rmdir(dir.c_str());
}

} // namespace

int connect_unix(const std::string &path)
{
	struct sockaddr_un addr = {};
	addr.sun_family = AF_UNIX;
	if (path.size() >= sizeof(addr.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, reinterpret_cast<struct sockaddr *>(&addr), sizeof(addr)) != 0) {
		const int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

std::vector<std::string> NeurondProcess::default_settings()
{
	return {"--profile", "trn2", "--devices", "2", "--cores", "2", "--hbm-mib", "256", "--spin-us", "20",
		"--log-level", "info"};
}

NeurondProcess::NeurondProcess(std::string socket_path, std::vector<std::string> settings)
	: settings_(settings.empty() ? default_settings() : std::move(settings))
{
	char tmpl[] = "/tmp/neurond-test-XXXXXX";
	if (mkdtemp(tmpl))
		dir_ = tmpl;
	socket_path_ = socket_path.empty() ? dir_ + "/neurond.sock" : std::move(socket_path);
	log_path_ = dir_ + "/neurond.log";
}

NeurondProcess::~NeurondProcess()
{
	if (pid_ > 0 && !reaped_)
		kill9();
	remove_tree(dir_);
}

// $NEURON_TEST_DAEMON_ARGS: "--flag value" pairs for every daemon a test starts,
// where the test did not set that flag itself (the QEMU guest sizes tiles for TCG).
static void add_default_flags(std::vector<std::string> *args)
{
	const char *env = std::getenv("NEURON_TEST_DAEMON_ARGS");
	if (!env)
		return;
	std::vector<std::string> words;
	std::istringstream in(env);
	for (std::string w; in >> w;)
		words.push_back(w);
	for (size_t i = 0; i + 1 < words.size(); i += 2)
		if (std::find(args->begin(), args->end(), words[i]) == args->end()) {
			args->push_back(words[i]);
			args->push_back(words[i + 1]);
		}
}

bool NeurondProcess::spawn(std::string *error)
{
	const char *binary = std::getenv("NEURON_DAEMON");
	if (!binary || !*binary) {
		*error = "NEURON_DAEMON is not set: it must name the neurond binary (meson test sets it)";
		return false;
	}
	if (dir_.empty()) {
		*error = "mkdtemp failed";
		return false;
	}
	if (!match_kmd_module(settings_, error))
		return false;
	// Everything the child needs is prepared before fork (only async-signal-safe
	// calls between fork and exec).
	std::vector<std::string> args = {binary, "--socket", socket_path_};
	args.insert(args.end(), settings_.begin(), settings_.end());
	add_default_flags(&args);
	if (listener_fd_ >= 0) {
		// LISTEN_PID must be the daemon's own pid, known only in the child: a shell
		// sets it to $$ and execs the daemon in place (same pid), as systemd does.
		args.insert(args.begin(), {"/bin/sh", "-c",
					   "export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=neurond.socket; exec \"$0\" \"$@\""});
	}
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		*error = "cannot create " + log_path_ + ": " + std::strerror(errno);
		return false;
	}
	const pid_t parent = getpid();
	const pid_t pid = fork();
	if (pid < 0) {
		*error = std::string("fork: ") + std::strerror(errno);
		close(log_fd);
		return false;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		const int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
		if (listener_fd_ >= 0) { // SD_LISTEN_FDS_START, without close-on-exec
			if (listener_fd_ != 3)
				dup2(listener_fd_, 3);
			else
				fcntl(3, F_SETFD, 0);
		}
		// Tests may block signals in threads; the daemon starts with a clean mask.
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, nullptr);
		execv(argv[0], argv.data());
		const char msg[] = "neurond_process: execv failed\n";
		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		_exit(127);
	}
	close(log_fd);
	pid_ = pid;
	reaped_ = false;
	return true;
}

bool NeurondProcess::wait_ready(int timeout_ms, std::string *error)
{
	const long long deadline = now_ms() + timeout_ms;
	for (;;) {
		if (!running()) {
			*error = "neurond exited during startup (" + exit_status().describe() + "); its log:\n" + log_tail();
			return false;
		}
		// A passed listener accepts connections into its backlog before neurond
		// runs (as systemd's socket does), so connecting proves nothing: its log
		// line does. (A neurond that then failed, e.g. with the driver's engine
		// taken, left the test's client waiting in the backlog until its timeout.)
		if (listener_fd_ >= 0) {
			if (log().find("daemon.ready") != std::string::npos)
				return true;
		} else if (const int fd = connect_unix(socket_path_); fd >= 0) {
			close(fd);
			return true;
		}
		if (now_ms() >= deadline) {
			*error = "neurond did not accept on " + socket_path_ + " within " + std::to_string(timeout_ms) +
				 " ms; its log:\n" + log_tail();
			return false;
		}
		sleep_ms(10);
	}
}

bool NeurondProcess::start(std::string *error) { return spawn(error) && wait_ready(5000, error); }

std::string NeurondProcess::Exit::describe() const
{
	if (!exited)
		return "still running";
	if (signaled)
		return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
	return "exit code " + std::to_string(code);
}

bool NeurondProcess::running()
{
	if (pid_ <= 0 || reaped_)
		return false;
	int status = 0;
	const pid_t r = waitpid(pid_, &status, WNOHANG);
	if (r == pid_) {
		reaped_ = true;
		wait_status_ = status;
		return false;
	}
	return r == 0;
}

NeurondProcess::Exit NeurondProcess::exit_status() const
{
	Exit e;
	if (!reaped_)
		return e;
	e.exited = true;
	e.signaled = WIFSIGNALED(wait_status_);
	e.code = WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : -1;
	e.signal = e.signaled ? WTERMSIG(wait_status_) : 0;
	return e;
}

NeurondProcess::Exit NeurondProcess::wait_exit(int timeout_ms)
{
	const long long deadline = now_ms() + timeout_ms;
	while (running() && now_ms() < deadline)
		sleep_ms(2);
	return exit_status();
}

NeurondProcess::Exit NeurondProcess::stop(int timeout_ms)
{
	if (pid_ > 0 && !reaped_) {
		ended_by_us_ = true;
		kill(pid_, SIGTERM);
	}
	Exit e = wait_exit(timeout_ms);
	if (!e.exited)
		kill9();
	return e;
}

void NeurondProcess::kill9()
{
	if (pid_ <= 0 || reaped_)
		return;
	ended_by_us_ = true;
	kill(pid_, SIGKILL);
	int status = 0;
	while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
	}
	reaped_ = true;
	wait_status_ = status;
}

std::string NeurondProcess::log() const
{
	std::ifstream f(log_path_);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

std::string NeurondProcess::log_tail(size_t bytes) const
{
	std::string all = log();
	return all.size() > bytes ? "..." + all.substr(all.size() - bytes) : all;
}

} // namespace neuron::test
