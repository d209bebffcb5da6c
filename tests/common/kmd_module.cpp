#include "kmd_module.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace neuron::test {

namespace {

// The value of flag `name` in settings, or `fallback`.
std::string flag(const std::vector<std::string> &settings, const std::string &name, const std::string &fallback)
{
	auto it = std::find(settings.begin(), settings.end(), name);
	return it != settings.end() && it + 1 != settings.end() ? *(it + 1) : fallback;
}

std::string param(const std::string &name)
{
	std::ifstream in("/sys/module/neuron/parameters/" + name);
	std::string v;
	in >> v;
	return v;
}

int run(std::vector<std::string> args)
{
	std::vector<char *> argv;
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	const pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv.data());
		_exit(127);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

} // namespace

bool match_kmd_module(const std::vector<std::string> &settings, std::string *error)
{
	const char *module = std::getenv("NEURON_TEST_KMD_MODULE");
	if (!module || !*module)
		return true;
	// neurond's own defaults where a flag is absent (trn2: 8 cores, 96 GiB; the
	// guest cannot back that much, so the suites always pass --hbm-mib).
	const std::string devices = flag(settings, "--devices", "1");
	const std::string profile = flag(settings, "--profile", "trn2");
	const std::string cores = flag(settings, "--cores", profile == "trn1" ? "2" : "8");
	const std::string hbm = flag(settings, "--hbm-mib", "256");
	if (param("devices") == devices && param("cores") == cores && param("hbm_mib") == hbm && param("profile") == profile)
		return true;
	// The previous test's daemon has exited; its files may take a moment to close.
	for (int i = 0; i < 50 && access("/sys/module/neuron", F_OK) == 0 && run({"rmmod", "neuron"}) != 0; ++i)
		usleep(100000);
	if (access("/sys/module/neuron", F_OK) == 0) {
		*error = "cannot unload neuron.ko to reload it with the test's device settings";
		return false;
	}
	std::vector<std::string> args = {"insmod", module, "devices=" + devices, "cores=" + cores, "hbm_mib=" + hbm,
					 "profile=" + profile};
	if (const char *extra = std::getenv("NEURON_TEST_KMD_MODULE_ARGS")) {
		for (std::string a; const char c : std::string(extra) + " ") {
			if (c == ' ') {
				if (!a.empty())
					args.push_back(a);
				a.clear();
			} else {
				a += c;
			}
		}
	}
	if (run(args) != 0) {
		*error = "insmod " + std::string(module) + " devices=" + devices + " cores=" + cores + " hbm_mib=" + hbm +
			 " profile=" + profile + " failed";
		return false;
	}
	return true;
}

} // namespace neuron::test
