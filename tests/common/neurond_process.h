// A neurond child process for integration tests: started from $NEURON_DAEMON on a
// fresh socket in a private temp dir, its stderr captured to a file, stopped with
// SIGTERM (exit status checked) or killed. The daemon also gets PR_SET_PDEATHSIG, so
// a crashing test never leaves it running.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace neuron::test {

class NeurondProcess {
public:
	// socket_path empty: a fresh path in a new temp dir. extra_args replace the
	// small default settings (devices, cores, HBM, spin) when non-empty.
	explicit NeurondProcess(std::string socket_path = {}, std::vector<std::string> settings = {});
	~NeurondProcess(); // kills (SIGKILL) a daemon still running, removes the temp dir
	NeurondProcess(const NeurondProcess &) = delete;
	NeurondProcess &operator=(const NeurondProcess &) = delete;

	static std::vector<std::string> default_settings();

	// fork + exec only. False with *error if $NEURON_DAEMON is unset or fork fails.
	bool spawn(std::string *error);
	// Polls until the socket accepts a connection. False (with *error) if the daemon
	// exited or timeout_ms passed.
	bool wait_ready(int timeout_ms, std::string *error);
	// spawn() + wait_ready(5000).
	bool start(std::string *error);
	// The next spawn() hands fd (a listening socket bound to socket_path()) to the
	// daemon as systemd's socket activation does: as fd 3 with LISTEN_PID/LISTEN_FDS.
	// The caller keeps fd open (systemd's socket outlives each neurond).
	void inherit_listener(int fd) { listener_fd_ = fd; }

	struct Exit {
		bool exited = false;    // false: still running when the wait ended
		bool signaled = false;
		int code = -1;          // exit code when exited normally
		int signal = 0;         // terminating signal when signaled
		std::string describe() const;
	};
	// Waits for the daemon to exit on its own (reaps it).
	Exit wait_exit(int timeout_ms);
	// SIGTERM, then waits up to timeout_ms; a daemon that does not exit is killed
	// with SIGKILL as a last resort (the returned Exit still says exited == false).
	Exit stop(int timeout_ms = 5000);
	// SIGKILL and reap.
	void kill9();
	// True while the child has not exited (reaps and records a child that has).
	bool running();
	// True once stop() or kill9() ended the daemon (as opposed to it dying on its own).
	bool ended_by_us() const { return ended_by_us_; }
	// How the daemon ended (exited == false while it runs).
	Exit exit_status() const;

	pid_t pid() const { return pid_; }
	const std::string &socket_path() const { return socket_path_; }
	const std::string &dir() const { return dir_; }
	// Everything the daemon wrote to stderr/stdout so far.
	std::string log() const;
	// The last `bytes` of log(), for failure messages.
	std::string log_tail(size_t bytes = 2000) const;

private:
	std::string dir_;        // temp dir we own (removed in the destructor)
	std::string socket_path_;
	std::string log_path_;
	std::vector<std::string> settings_;
	int listener_fd_ = -1;
	pid_t pid_ = -1;
	bool reaped_ = false;
	bool ended_by_us_ = false;
	int wait_status_ = 0;
};

// A connected AF_UNIX stream socket to path, or -1 (errno set).
int connect_unix(const std::string &path);

} // namespace neuron::test
