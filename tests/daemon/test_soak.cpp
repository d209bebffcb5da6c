// The short soak (CI): bench-soak (tests/bench/bench_soak.cpp) for ~10 s with its
// 64 tenant processes, churn, SIGKILLs and random loans, asserting what must hold
// on any machine: no wrong result, no error seen by a well-behaved tenant, no
// tenant left and the daemon's descriptors back to their start value. Timing
// (the p99 ratio) is printed by the benchmark, never asserted.
#include <criterion/criterion.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace {

std::string line_with(const std::string &out, const std::string &prefix)
{
	const size_t at = out.find(prefix);
	if (at == std::string::npos)
		return {};
	return out.substr(at, out.find('\n', at) - at);
}

} // namespace

Test(soak, short_soak_is_clean, .timeout = 300)
{
	const char *bench = std::getenv("NEURON_BENCH_SOAK");
	cr_assert(bench && *bench, "NEURON_BENCH_SOAK is not set (meson test sets it)");
	const std::string cmd = std::string(bench) + " --seconds 10 --alone-seconds 2 --tenants 64 --seed 7 --no-torch --check 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	cr_assert(p, "cannot run %s", cmd.c_str());
	std::string out;
	std::array<char, 4096> buf;
	for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;)
		out.append(buf.data(), n);
	const int status = pclose(p);
	std::printf("%s", out.c_str());
	cr_assert(line_with(out, "  wrong results: ") == "  wrong results: 0 (goal 0)", "%s", out.c_str());
	cr_assert(line_with(out, "  errors seen by well-behaved tenants: ") ==
			  "  errors seen by well-behaved tenants: 0 (goal 0)",
		  "%s", out.c_str());
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench-soak --check failed (status %d):\n%s", status,
		  out.c_str());
}
