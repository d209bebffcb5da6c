// Starts a private neurond for a benchmark or demo and stops it at scope exit.
#pragma once

#include <string>
#include <vector>

namespace bench {

class DaemonLauncher {
public:
	~DaemonLauncher();
	// Returns the socket path, or "" (with a message on stderr) if it did not come up.
	std::string start(const std::string &binary, const std::vector<std::string> &args);

private:
	int pid_ = -1;
	std::string dir_;
};

} // namespace bench
