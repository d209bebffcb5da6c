// The BLAS kernel choice (blas_select.h): the feature -> kernel-set rule against
// OpenBLAS's own fall-back table, the host's features against /proc/cpuinfo, the
// kernel set in use after select_blas() against the CPU's instruction set, and an
// sgemm on the selected kernels against a double product.
#include <blas_select.h>

#include <cblas.h>
#include <criterion/criterion.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <strings.h>
#include <vector>

using neuron::kernels::CpuFeatures;

namespace {

CpuFeatures cpu(const char *vendor, bool avx, bool avx2, bool fma, bool avx512)
{
	CpuFeatures f;
	f.vendor = vendor;
	f.avx = avx;
	f.avx2 = avx2;
	f.fma = fma;
	f.avx512 = avx512;
	return f;
}

// The "flags", "cpu family" and "model" of the first processor in /proc/cpuinfo.
struct ProcCpu {
	std::set<std::string> flags;
	int family = -1, model = -1;
	std::string vendor;
};

ProcCpu proc_cpuinfo()
{
	ProcCpu p;
	std::ifstream in("/proc/cpuinfo");
	std::string line;
	while (std::getline(in, line) && !line.empty()) {
		const size_t colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		std::string key = line.substr(0, colon);
		key.erase(key.find_last_not_of(" \t") + 1);
		const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
		if (key == "flags") {
			std::istringstream words(value);
			for (std::string w; words >> w;)
				p.flags.insert(w);
		} else if (key == "cpu family") {
			p.family = std::atoi(value.c_str());
		} else if (key == "model") {
			p.model = std::atoi(value.c_str());
		} else if (key == "vendor_id") {
			p.vendor = value;
		}
	}
	return p;
}

} // namespace

Test(blas_select, kernel_set_for_features)
{
	using neuron::kernels::openblas_kernel_for;
	using neuron::kernels::openblas_kernel_level;
	const struct {
		CpuFeatures f;
		const char *kernel;
		int level;
	} cases[] = {
		{cpu("GenuineIntel", true, true, true, true), "SkylakeX", 3},     // Skylake-SP .. Emerald Rapids
		{cpu("AuthenticAMD", true, true, true, true), "SkylakeX", 3},     // Zen 4, Zen 5
		{cpu("AuthenticAMD", true, true, true, false), "Zen", 2},         // Zen 1-3
		{cpu("HygonGenuine", true, true, true, false), "Zen", 2},         // Dhyana
		{cpu("GenuineIntel", true, true, true, false), "Haswell", 2},     // Haswell .. Alder Lake
		{cpu("CentaurHauls", true, true, true, false), "Haswell", 2},     // any other AVX2 vendor
		{cpu("GenuineIntel", true, true, false, false), "Sandybridge", 1}, // AVX2 without FMA
		{cpu("GenuineIntel", true, false, false, false), "Sandybridge", 1},
		{cpu("AuthenticAMD", true, false, true, false), "", -1},           // Bulldozer family: OpenBLAS's table
		{cpu("GenuineIntel", false, false, false, false), "", -1},         // pre-AVX, or the OS saves no ymm
		{cpu("", false, false, false, false), "", -1},                     // not x86
	};
	for (const auto &c : cases) {
		const std::string k = openblas_kernel_for(c.f);
		cr_expect_eq(k, std::string(c.kernel), "%s avx %d avx2 %d fma %d avx512 %d: got '%s', want '%s'",
			     c.f.vendor.c_str(), c.f.avx, c.f.avx2, c.f.fma, c.f.avx512, k.c_str(), c.kernel);
		if (*c.kernel)
			cr_expect_eq(openblas_kernel_level(k), c.level, "level of %s", c.kernel);
	}
	// OpenBLAS's older sets rank below every set the rule picks; unknown names are -1.
	cr_expect_eq(openblas_kernel_level("Prescott"), 0);
	cr_expect_eq(openblas_kernel_level("prescott"), 0); // OpenBLAS compares without case
	cr_expect_eq(openblas_kernel_level("Cooperlake"), 3);
	cr_expect_eq(openblas_kernel_level("NoSuchCore"), -1);
}

Test(blas_select, host_features_match_proc_cpuinfo)
{
	const CpuFeatures f = neuron::kernels::host_cpu_features();
	const ProcCpu p = proc_cpuinfo();
	if (p.vendor.empty())
		cr_skip_test("no x86 /proc/cpuinfo");
	auto has = [&](const char *flag) { return p.flags.count(flag) > 0; };
	cr_expect_eq(f.vendor, p.vendor);
	cr_expect_eq(f.family, p.family);
	cr_expect_eq(f.model, p.model, "model %#x, /proc/cpuinfo %#x", f.model, p.model);
	cr_expect_eq(f.avx, has("avx"));
	cr_expect_eq(f.avx2, has("avx2"));
	cr_expect_eq(f.fma, has("fma"));
	const bool avx512 = has("avx512f") && has("avx512cd") && has("avx512bw") && has("avx512dq") && has("avx512vl");
	const char *cap = std::getenv("NEURON_MAX_CPU_ISA");
	if (cap && strcasecmp(cap, "avx2") == 0) {
		cr_expect(!f.avx512, "AVX-512 shown under NEURON_MAX_CPU_ISA=avx2");
		cr_expect_eq(f.cap, std::string(avx512 ? "avx2" : ""));
	} else {
		cr_expect_eq(f.avx512, avx512);
	}
}

// NEURON_MAX_CPU_ISA's values: "avx2" hides AVX-512 (and says so), "avx512" or
// nothing changes nothing, any case; any other value is refused with what it
// accepts, and the features stay as they were.
Test(blas_select, isa_cap_values)
{
	using neuron::kernels::apply_isa_cap;
	for (const char *v : {"avx2", "AVX2", "Avx2"}) {
		CpuFeatures f = cpu("GenuineIntel", true, true, true, true);
		cr_expect_eq(apply_isa_cap(f, v), std::string());
		cr_expect(!f.avx512 && f.avx2 && f.fma && f.avx, "%s", v);
		cr_expect_eq(f.cap, std::string("avx2"));
		cr_expect_eq(neuron::kernels::openblas_kernel_for(f), std::string("Haswell"));
	}
	CpuFeatures zen3 = cpu("AuthenticAMD", true, true, true, false);
	cr_expect_eq(apply_isa_cap(zen3, "avx2"), std::string());
	cr_expect(zen3.cap.empty(), "a CPU without AVX-512 has nothing to hide");
	for (const char *v : {static_cast<const char *>(nullptr), "", "avx512", "AVX512"}) {
		CpuFeatures f = cpu("AuthenticAMD", true, true, true, true);
		cr_expect_eq(apply_isa_cap(f, v), std::string());
		cr_expect(f.avx512 && f.cap.empty(), "%s", v ? v : "(unset)");
	}
	for (const char *v : {"sse", "avx-512", "avx2 ", "all"}) {
		CpuFeatures f = cpu("GenuineIntel", true, true, true, true);
		const std::string e = apply_isa_cap(f, v);
		cr_expect(e.find("NEURON_MAX_CPU_ISA") != std::string::npos && e.find(v) != std::string::npos &&
				  e.find("avx2") != std::string::npos,
			  "'%s': %s", v, e.c_str());
		cr_expect(f.avx512 && f.cap.empty(), "'%s' changed the features", v);
	}
}

// The kernels in use never target an older instruction set than the CPU runs
// (OpenBLAS 0.3.21 alone picks Prescott on Emerald Rapids), unless the user named
// a kernel set with OPENBLAS_CORETYPE.
Test(blas_select, kernels_in_use_fit_the_cpu)
{
	using neuron::kernels::openblas_kernel_level;
	const auto &s = neuron::kernels::select_blas();
	cr_expect_eq(std::string(openblas_get_corename()), s.kernel);
	cr_expect_eq(s.wanted, neuron::kernels::openblas_kernel_for(s.cpu));
	const char *user = std::getenv("OPENBLAS_CORETYPE");
	if (user && *user) {
		cr_expect(s.reason.find("OPENBLAS_CORETYPE") != std::string::npos, "%s", s.reason.c_str());
		return;
	}
	if (!s.wanted.empty() && openblas_kernel_level(s.at_load) >= 0)
		cr_expect_geq(openblas_kernel_level(s.kernel), openblas_kernel_level(s.wanted),
			      "kernels %s for a CPU that runs %s (%s)", s.kernel.c_str(), s.wanted.c_str(), s.reason.c_str());
	// Under NEURON_MAX_CPU_ISA=avx2 nothing newer than AVX2 is in use.
	if (!s.cpu.cap.empty() && openblas_kernel_level(s.at_load) >= 0)
		cr_expect_leq(openblas_kernel_level(s.kernel), 2, "kernels %s under NEURON_MAX_CPU_ISA=%s (%s)",
			      s.kernel.c_str(), s.cpu.cap.c_str(), s.reason.c_str());
	// Selecting again changes nothing, and the environment is as it was.
	cr_expect_eq(&neuron::kernels::select_blas(), &s);
	cr_expect_null(std::getenv("OPENBLAS_CORETYPE"));
	const std::string line = neuron::kernels::blas_description();
	cr_expect(line.find(s.library) == 0 && line.find(s.kernel) != std::string::npos, "%s", line.c_str());
}

// sgemm on the selected kernels, every transpose pair, against a double product.
Test(blas_select, sgemm_on_selected_kernels)
{
	neuron::kernels::select_blas();
	const int M = 67, N = 45, K = 130;
	std::vector<float> a(M * K), b(K * N), c(M * N, 1.0f);
	for (size_t i = 0; i < a.size(); ++i)
		a[i] = float((i * 7) % 17) / 17.0f - 0.5f;
	for (size_t i = 0; i < b.size(); ++i)
		b[i] = float((i * 5) % 13) / 13.0f - 0.5f;
	for (int ta = 0; ta < 2; ++ta)
		for (int tb = 0; tb < 2; ++tb) {
			// a is M x K as stored row-major, or its transpose stored (K x M); likewise b.
			auto A = [&](int i, int k) { return ta ? a[k * M + i] : a[i * K + k]; };
			auto B = [&](int k, int j) { return tb ? b[j * K + k] : b[k * N + j]; };
			std::fill(c.begin(), c.end(), 1.0f);
			cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 2.0f,
				    a.data(), ta ? M : K, b.data(), tb ? K : N, 0.5f, c.data(), N);
			for (int i = 0; i < M; ++i)
				for (int j = 0; j < N; ++j) {
					double want = 0.5;
					for (int k = 0; k < K; ++k)
						want += 2.0 * double(A(i, k)) * double(B(k, j));
					cr_assert(std::fabs(c[i * N + j] - want) <= 1e-4 * (1 + std::fabs(want)),
						  "trans %d/%d [%d,%d]: %g, want %g", ta, tb, i, j, double(c[i * N + j]), want);
				}
		}
}
