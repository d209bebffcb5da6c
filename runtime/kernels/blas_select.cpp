#include "blas_select.h"

#include "micro_kernel.h"
#include "packed_gemm.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

// OpenBLAS's kernel selection (driver/others/dynamic.c): exported by DYNAMIC_ARCH
// builds, absent from single-target ones (then the weak references are null and
// the build's one kernel set stands).
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace neuron::kernels {

namespace {

constexpr const char *kCoreTypeVar = "OPENBLAS_CORETYPE";
constexpr const char *kIsaCapVar = "NEURON_MAX_CPU_ISA";

#if defined(__x86_64__) || defined(__i386__)
void read_vendor_and_model(CpuFeatures &f)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return;
	char v[13] = {};
	const unsigned regs[3] = {b, d, c}; // the vendor string's order
	for (int i = 0; i < 3; ++i)
		for (int k = 0; k < 4; ++k)
			v[i * 4 + k] = static_cast<char>((regs[i] >> (8 * k)) & 0xff);
	f.vendor = v;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	const int family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
	f.family = family == 0xf ? family + static_cast<int>((a >> 20) & 0xff) : family;
	f.model = (family == 0x6 || family == 0xf) ? model + static_cast<int>(((a >> 16) & 0xf) << 4) : model;
}
#endif

bool is_amd(const CpuFeatures &f) { return f.vendor == "AuthenticAMD" || f.vendor == "HygonGenuine"; }

std::string corename()
{
	const char *n = openblas_get_corename();
	return n ? n : "unknown";
}

// "OpenBLAS 0.3.21" from openblas_get_config() ("OpenBLAS 0.3.21 NO_LAPACKE
// DYNAMIC_ARCH ..."), plus its threading model.
std::string library_name()
{
	const std::string config = openblas_get_config() ? openblas_get_config() : "OpenBLAS";
	size_t end = config.find(' ');
	if (end != std::string::npos)
		end = config.find(' ', end + 1);
	const int parallel = openblas_get_parallel();
	const char *threads = parallel == 0 ? "single-threaded" : parallel == 1 ? "pthreads" : "OpenMP";
	return config.substr(0, end) + " (" + threads + ")";
}

// Runs OpenBLAS's load-time selection again with OPENBLAS_CORETYPE=kernel (see
// blas_select.h). Only before the first BLAS call, with no other thread running
// BLAS or reading the environment.
void reselect_openblas(const std::string &kernel)
{
	gotoblas_dynamic_quit();
	setenv(kCoreTypeVar, kernel.c_str(), 1);
	gotoblas_dynamic_init();
	unsetenv(kCoreTypeVar); // child processes (e.g. python) make their own choice
}

BlasSelection run_selection()
{
	BlasSelection s;
	s.cpu = host_cpu_features();
	s.library = library_name();
	s.at_load = corename();
	s.wanted = openblas_kernel_for(s.cpu);
	const char *user = std::getenv(kCoreTypeVar);
	const int have = openblas_kernel_level(s.at_load), want = openblas_kernel_level(s.wanted);
	if (user && *user) {
		s.reason = std::string("set by ") + kCoreTypeVar + "=" + user;
	} else if (s.wanted.empty()) {
		s.reason = "OpenBLAS's own choice (no rule for this CPU)";
	} else if (have < 0) {
		s.reason = "OpenBLAS's own choice (a kernel set newer than this file's table)";
	} else if (have == want || (have > want && s.cpu.cap.empty())) {
		s.reason = strcasecmp(s.at_load.c_str(), s.wanted.c_str()) == 0
				   ? "OpenBLAS's own choice, as the CPU's features give"
				   : "OpenBLAS's own choice, for the same instruction set as the CPU's features give";
	} else if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) {
		s.reason = "fixed when this OpenBLAS was built (no DYNAMIC_ARCH): " + s.wanted + " would suit the CPU";
	} else {
		reselect_openblas(s.wanted);
		const std::string features = s.cpu.cap.empty() ? "the CPU's features"
							       : std::string("the CPU's features under ") + kIsaCapVar + "=" + s.cpu.cap;
		s.reason = strcasecmp(corename().c_str(), s.wanted.c_str()) == 0
				   ? "chosen from " + features + " (OpenBLAS picked " + s.at_load + " at load)"
				   : "OpenBLAS has no " + s.wanted + " kernels (picked " + s.at_load + " at load)";
	}
	s.kernel = corename();
	return s;
}

} // namespace

std::string apply_isa_cap(CpuFeatures &f, const char *value)
{
	if (!value || !*value || strcasecmp(value, "avx512") == 0)
		return {};
	if (strcasecmp(value, "avx2") != 0)
		return std::string(kIsaCapVar) + "='" + value + "': expected avx512 (all the CPU has) or avx2";
	if (f.avx512) {
		f.avx512 = false;
		f.cap = "avx2";
	}
	return {};
}

std::string isa_cap_error()
{
	CpuFeatures f;
	return apply_isa_cap(f, std::getenv(kIsaCapVar));
}

CpuFeatures host_cpu_features()
{
	CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
	read_vendor_and_model(f);
	// libgcc's checks include the OS's XSAVE support of the ymm and zmm state.
	__builtin_cpu_init();
	f.avx = __builtin_cpu_supports("avx");
	f.avx2 = __builtin_cpu_supports("avx2");
	f.fma = __builtin_cpu_supports("fma");
	f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
		   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
		   __builtin_cpu_supports("avx512vl");
#endif
	apply_isa_cap(f, std::getenv(kIsaCapVar));
	return f;
}

std::string openblas_kernel_for(const CpuFeatures &cpu)
{
	if (cpu.avx512 && cpu.avx2 && cpu.fma)
		return "SkylakeX";
	if (cpu.avx2 && cpu.fma)
		return is_amd(cpu) ? "Zen" : "Haswell";
	if (cpu.avx && !is_amd(cpu))
		return "Sandybridge";
	return "";
}

int openblas_kernel_level(const std::string &kernel)
{
	static const struct {
		const char *name;
		int level;
	} table[] = {
		{"SkylakeX", 3},    {"Cooperlake", 3},   {"SapphireRapids", 3}, {"Haswell", 2},
		{"Zen", 2},         {"Excavator", 2},    {"Sandybridge", 1},    {"Bulldozer", 1},
		{"Piledriver", 1},  {"Steamroller", 1},  {"Prescott", 0},       {"Core2", 0},
		{"Penryn", 0},      {"Dunnington", 0},   {"Nehalem", 0},        {"Atom", 0},
		{"Barcelona", 0},   {"Opteron", 0},      {"Opteron_SSE3", 0},   {"Nano", 0},
		{"Bobcat", 0},      {"Athlon", 0},       {"Katmai", 0},         {"Coppermine", 0},
		{"Northwood", 0},   {"Banias", 0},
	};
	for (const auto &e : table)
		if (strcasecmp(kernel.c_str(), e.name) == 0)
			return e.level;
	return -1;
}

const BlasSelection &select_blas()
{
	static std::once_flag once;
	static BlasSelection selection;
	std::call_once(once, [] { selection = run_selection(); });
	return selection;
}

std::string blas_description()
{
	const BlasSelection &s = select_blas();
	std::string cpu = s.cpu.vendor.empty() ? "not x86" : s.cpu.vendor;
	if (!s.cpu.vendor.empty()) {
		char fm[48];
		std::snprintf(fm, sizeof fm, " family %d model 0x%x:", s.cpu.family, s.cpu.model);
		cpu += fm;
		for (const auto &[has, name] : {std::pair{s.cpu.avx512, " AVX-512"}, std::pair{s.cpu.avx2, " AVX2"},
						std::pair{s.cpu.fma, " FMA"}, std::pair{s.cpu.avx, " AVX"}})
			if (has)
				cpu += name;
		if (!s.cpu.avx)
			cpu += " no AVX";
		if (!s.cpu.cap.empty())
			cpu += std::string(" (capped at ") + s.cpu.cap + " by " + kIsaCapVar + ": no AVX-512)";
	}
	const detail::MicroKernel *mk = detail::active_micro_kernel();
	const std::string chip = mk ? "packed " + std::string(mk->name) + " GEMM, BLAS for thin products"
				    : "BLAS (the packed GEMM needs AVX-512 or AVX2 + FMA)";
	return s.library + ", kernels " + s.kernel + ": " + s.reason + "; CPU " + cpu + "; chip matmul: " + chip;
}

} // namespace neuron::kernels
