#include "gemm_refs.h"

#include "stats.h"

#include <blas_select.h>
#include <neuron/futex.h>

#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <thread>

using neuron::detail::monotonic_ns;

namespace bench {

namespace {

// OpenBLAS's and BLIS's worker threads spin for a while after each call; a pause
// between candidates keeps one's spinning out of the next one's timing.
void let_workers_idle() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

// reps timed runs after one warm-up: the median in GFLOP/s.
template <typename Run> double median_gflops(int n, int reps, Run run)
{
	const double flop = 2.0 * n * double(n) * n;
	std::vector<double> rates;
	for (int r = 0; r < reps + 1; ++r) {
		const uint64_t t0 = monotonic_ns();
		run();
		if (r > 0)
			rates.push_back(flop / double(monotonic_ns() - t0));
	}
	return median(rates);
}

std::string shell_quote(const std::string &s)
{
	std::string q = "'";
	for (char ch : s)
		q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
	return q + "'";
}

} // namespace

// BLIS's typed API (blis.h, BLIS 0.9: dim_t and inc_t are 64-bit, trans_t an enum
// whose BLIS_NO_TRANSPOSE is 0), resolved from libblis.so.4.
struct GemmRefs::Blis {
	using Sgemm = void (*)(int, int, int64_t, int64_t, int64_t, float *, float *, int64_t, int64_t, float *, int64_t,
			       int64_t, float *, float *, int64_t, int64_t);
	void *handle = nullptr;
	Sgemm sgemm = nullptr;
	std::string version, name, note; // "BLIS 0.9.0", "BLIS 0.9.0 skx"
};

GemmRefs::GemmRefs(int threads, std::string python, std::string torch_helper)
	: threads_(threads), python_(std::move(python)), torch_helper_(std::move(torch_helper)), blis_(new Blis)
{
	neuron::kernels::select_blas(); // the runtime's kernel set, before the first BLAS call
	openblas_set_num_threads(threads_);

	void *h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		blis_->note = "not installed (Debian libblis4-pthread)";
		return;
	}
	auto arch_string = reinterpret_cast<const char *(*)(int)>(dlsym(h, "bli_arch_string"));
	auto query_arch = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
	auto version = reinterpret_cast<const char *(*)()>(dlsym(h, "bli_info_get_version_str"));
	auto set_threads = reinterpret_cast<void (*)(int64_t)>(dlsym(h, "bli_thread_set_num_threads"));
	auto init = reinterpret_cast<void (*)()>(dlsym(h, "bli_init"));
	blis_->sgemm = reinterpret_cast<Blis::Sgemm>(dlsym(h, "bli_sgemm"));
	if (!arch_string || !query_arch || !version || !set_threads || !init || !blis_->sgemm) {
		blis_->note = "libblis.so.4 lacks the BLIS 0.9 typed API";
		blis_->sgemm = nullptr;
		dlclose(h);
		return;
	}
	blis_->handle = h;
	// BLIS fixes its kernel set in bli_init(), from BLIS_ARCH_TYPE (an arch id) when
	// set; the names of the ids come from bli_arch_string, which needs no init.
	// (bli_arch_query_id before bli_init aborts when BLIS_ARCH_TYPE is set.)
	// Under NEURON_MAX_CPU_ISA=avx2 BLIS's own detection would still take AVX-512
	// kernels on an AVX-512 host: its AVX2 configuration for the vendor instead.
	std::string how = std::getenv("BLIS_ARCH_TYPE") ? "set by BLIS_ARCH_TYPE" : "BLIS's own choice";
	const neuron::kernels::CpuFeatures cpu = neuron::kernels::host_cpu_features();
	const std::string want = cpu.avx512 ? "skx" : !cpu.cap.empty() ? (cpu.vendor == "AuthenticAMD" ? "zen3" : "haswell") : "";
	if (!std::getenv("BLIS_ARCH_TYPE") && !want.empty())
		for (int id = 0; id < 64; ++id) {
			const char *s = arch_string(id);
			if (!s || std::string(s) == "generic")
				break;
			if (s == want) {
				setenv("BLIS_ARCH_TYPE", std::to_string(id).c_str(), 1);
				how = cpu.cap.empty() ? "chosen from the CPU's features (BLIS_ARCH_TYPE)"
						      : "chosen from the CPU's features under NEURON_MAX_CPU_ISA=" + cpu.cap +
								" (BLIS_ARCH_TYPE)";
				break;
			}
		}
	init();
	if (how.starts_with("chosen"))
		unsetenv("BLIS_ARCH_TYPE"); // ours, not the user's
	const std::string arch = arch_string(query_arch());
	set_threads(threads_);
	blis_->version = std::string("BLIS ") + version();
	blis_->name = blis_->version + " " + arch;
	blis_->note = "kernels " + arch + ": " + how;
}

GemmRefs::~GemmRefs()
{
	if (blis_->handle)
		dlclose(blis_->handle);
}

std::vector<std::string> GemmRefs::describe() const
{
	std::vector<std::string> lines;
	lines.push_back(neuron::kernels::blas_description());
	lines.push_back(blis_->sgemm ? blis_->version + ", " + blis_->note : "BLIS: " + blis_->note);
	lines.push_back("PyTorch: " + (python_.empty() ? std::string("skipped (--python '')")
						      : "torch.matmul through " + python_ + " " + torch_helper_));
	return lines;
}

GemmRef GemmRefs::openblas(int n, const float *a, const float *b, float *c, int reps)
{
	const auto &s = neuron::kernels::select_blas();
	GemmRef r;
	r.name = s.library.substr(0, s.library.find(" (")) + " " + s.kernel + " cblas_sgemm";
	r.gflops = median_gflops(n, reps, [&] {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	});
	return r;
}

GemmRef GemmRefs::blis(int n, const float *a, const float *b, float *c, int reps)
{
	if (!blis_->sgemm)
		return {"BLIS bli_sgemm", 0.0, blis_->note};
	GemmRef r;
	r.name = blis_->name + " bli_sgemm";
	std::vector<float> out(size_t(n) * n);
	float one = 1.0f, zero = 0.0f;
	r.gflops = median_gflops(n, reps, [&] {
		blis_->sgemm(0, 0, n, n, n, &one, const_cast<float *>(a), n, 1, const_cast<float *>(b), n, 1, &zero,
			     out.data(), n, 1);
	});
	// A reference that computes something else is no reference.
	for (size_t i = 0; i < out.size(); i += 997)
		if (std::abs(out[i] - c[i]) > 1e-3f * (1.0f + std::abs(c[i])))
			return {r.name, 0.0, "its result differs from OpenBLAS's"};
	return r;
}

// torch_matmul.py N THREADS REPS ends with the line "<name>\t<median GFLOP/s>",
// or exits non-zero after a line that says why (torch not importable, ...).
GemmRef GemmRefs::torch(int n, int reps)
{
	GemmRef r;
	r.name = "PyTorch torch.matmul";
	if (python_.empty()) {
		r.note = "skipped";
		return r;
	}
	// Under NEURON_MAX_CPU_ISA=avx2, PyTorch's own caps for its BLAS (MKL), oneDNN
	// and ATen kernels, so that its matmul is an AVX2 one too.
	const bool capped = !neuron::kernels::host_cpu_features().cap.empty();
	const std::string env = capped ? "MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 " : "";
	const std::string cmd = env + shell_quote(python_) + " " + shell_quote(torch_helper_) + " " + std::to_string(n) +
				" " + std::to_string(threads_) + " " + std::to_string(reps) + " 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	if (!p) {
		r.note = "could not start " + python_;
		return r;
	}
	std::string last;
	for (char buf[512]; fgets(buf, sizeof buf, p);) {
		last = buf;
		while (!last.empty() && (last.back() == '\n' || last.back() == '\r'))
			last.pop_back();
	}
	const int status = pclose(p);
	const size_t tab = last.find('\t');
	if (status != 0 || tab == std::string::npos) {
		r.note = last.empty() ? "no output from " + torch_helper_ : last;
		return r;
	}
	r.name = last.substr(0, tab);
	r.gflops = std::strtod(last.c_str() + tab + 1, nullptr);
	return r;
}

std::vector<GemmRef> GemmRefs::measure(int n, const float *a, const float *b, float *c, int reps)
{
	std::vector<GemmRef> refs;
	refs.push_back(openblas(n, a, b, c, reps));
	let_workers_idle();
	refs.push_back(blis(n, a, b, c, reps));
	let_workers_idle();
	refs.push_back(torch(n, reps));
	return refs;
}

const GemmRef *fastest(const std::vector<GemmRef> &refs)
{
	const GemmRef *best = nullptr;
	for (const auto &r : refs)
		if (r.gflops > 0 && (!best || r.gflops > best->gflops))
			best = &r;
	return best;
}

} // namespace bench
