// bench-gemm: the chip's packed fp32 multiply (runtime/kernels/packed_gemm.h) on one
// thread, tile by tile as a NeuronCore runs a matmul, against single-threaded
// OpenBLAS (on the kernels blas_select.h chooses) on the whole product.
//
//   bench-gemm [--sizes N,N,...] [--tile MxNxK] [--reps R] [--kernel AVX-512|AVX2]
//
// Both are timed in the calling thread's own CPU time, alternately, so the ratio
// holds on a machine shared with other work (where bench-runtime's wall-clock
// figures do not); it leaves out what the chip adds around the kernel (command
// round trip, two threads, scheduling), which bench-runtime measures. Tiles: the
// chip's for a 2^24 multiply-add budget (runtime/sched/tiling.cpp), K tiles of an
// output block in order, later ones adding into it; the packed blocks are made
// afresh for every run (GemmPacks), as for every command.
#include "stats.h"

#include <blas_select.h>
#include <gemm_packs.h>
#include <micro_kernel.h>
#include <packed_gemm.h>

#include <neuron/cmd.h>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

namespace {

using neuron::kernels::GemmPacks;
using neuron::kernels::detail::Mat;

double thread_cpu_seconds()
{
	timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Mat row_major(std::vector<float> &v, int n)
{
	return Mat{reinterpret_cast<std::byte *>(v.data()), NEURON_DTYPE_F32, n, n, n, 1, sizeof(float)};
}

// c = a @ b through the packed multiply, tile by tile.
void tiled_packed(int n, int mt, int nt, int kt, Mat a, Mat b, float *c)
{
	GemmPacks packs;
	const size_t blocks = size_t((n + mt - 1) / mt + (n + nt - 1) / nt) * size_t((n + kt - 1) / kt);
	packs.reserve(neuron::kernels::tile_pack_floats(mt, nt, kt) * blocks);
	for (int i = 0; i < n; i += mt)
		for (int j = 0; j < n; j += nt)
			for (int k = 0; k < n; k += kt) {
				const int i1 = std::min(n, i + mt), j1 = std::min(n, j + nt), k1 = std::min(n, k + kt);
				neuron::kernels::detail::packed_gemm(1.0f, a.sub(i, i1, k, k1), b.sub(k, k1, j, j1),
								     k == 0 ? 0.0f : 1.0f, c + size_t(i) * n + j, n, &packs);
			}
}

bool parse_tile(const std::string &s, int *m, int *n, int *k)
{
	return std::sscanf(s.c_str(), "%dx%dx%d", m, n, k) == 3 && *m > 0 && *n > 0 && *k > 0;
}

void run(int n, int mt, int nt, int kt, int reps)
{
	std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n), ref(size_t(n) * n);
	for (size_t i = 0; i < a.size(); ++i) {
		a[i] = float((i * 7) % 13) / 13.0f - 0.5f;
		b[i] = float((i * 5) % 11) / 11.0f - 0.5f;
	}
	const double flop = 2.0 * n * double(n) * n;
	std::vector<double> packed, blas, ratio;
	for (int r = 0; r < reps + 1; ++r) { // the first round warms up
		double t0 = thread_cpu_seconds();
		tiled_packed(n, mt, nt, kt, row_major(a, n), row_major(b, n), c.data());
		const double tp = thread_cpu_seconds() - t0;
		t0 = thread_cpu_seconds();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
			    ref.data(), n);
		const double tb = thread_cpu_seconds() - t0;
		if (r == 0)
			continue;
		packed.push_back(flop / tp / 1e9);
		blas.push_back(flop / tb / 1e9);
		ratio.push_back(tb / tp);
	}
	for (size_t i = 0; i < c.size(); i += 997)
		if (std::fabs(c[i] - ref[i]) > 1e-3f * (1.0f + std::fabs(ref[i]))) {
			std::fprintf(stderr, "bench-gemm: %d: packed result differs from OpenBLAS's at %zu\n", n, i);
			std::exit(1);
		}
	std::printf("%-6d %9.1f %9.1f %9.1f %9.1f %9.3f %9.3f\n", n, bench::median(packed),
		    *std::max_element(packed.begin(), packed.end()), bench::median(blas),
		    *std::max_element(blas.begin(), blas.end()), bench::median(ratio),
		    *std::max_element(packed.begin(), packed.end()) / *std::max_element(blas.begin(), blas.end()));
}

} // namespace

int main(int argc, char **argv)
{
	if (const std::string bad = neuron::kernels::isa_cap_error(); !bad.empty()) {
		std::fprintf(stderr, "bench-gemm: %s\n", bad.c_str());
		return 2;
	}
	neuron::kernels::select_blas();
	openblas_set_num_threads(1);
	std::vector<int> sizes = {1024, 2048, 4096};
	int mt = 128, nt = 128, kt = 512, reps = 0;
	for (int i = 1; i < argc; ++i) {
		const std::string arg = argv[i];
		if (arg == "--sizes" && i + 1 < argc) {
			sizes.clear();
			for (const char *p = argv[++i]; *p;) {
				char *end;
				const long v = std::strtol(p, &end, 10);
				if (end == p || v <= 0 || v > 16384 || (*end && *end != ',')) {
					sizes.clear(); // reported below
					break;
				}
				sizes.push_back(int(v));
				p = *end == ',' ? end + 1 : end;
			}
		} else if (arg == "--tile" && i + 1 < argc && parse_tile(argv[i + 1], &mt, &nt, &kt)) {
			++i;
		} else if (arg == "--reps" && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
			reps = std::atoi(argv[++i]);
		} else if (arg == "--kernel" && i + 1 < argc) {
			if (!neuron::kernels::detail::use_micro_kernel(argv[++i])) {
				std::fprintf(stderr, "bench-gemm: this host cannot run the %s kernel\n", argv[i]);
				return 2;
			}
		} else {
			std::fprintf(stderr,
				     "usage: bench-gemm [--sizes N,N,...] [--tile MxNxK] [--reps R] [--kernel AVX-512|AVX2]\n");
			return 2;
		}
	}
	if (sizes.empty() || !neuron::kernels::detail::packed_gemm_available()) {
		std::fprintf(stderr, "bench-gemm: %s\n", sizes.empty() ? "--sizes takes sizes 1-16384 separated by commas" : "this host has neither AVX-512 nor AVX2 + FMA");
		return 2;
	}
	std::printf("bench-gemm: packed multiply in %dx%dx%d tiles vs %s, one thread, GFLOP/s of thread CPU time\n"
		    "%s\n\n",
		    mt, nt, kt, neuron::kernels::select_blas().library.c_str(),
		    neuron::kernels::blas_description().c_str());
	std::printf("%-6s %9s %9s %9s %9s %9s %9s\n", "n", "packed", "best", "OpenBLAS", "best", "ratio", "best/best");
	for (int n : sizes)
		run(n, mt, nt, kt, reps > 0 ? reps : std::max(3, int(16 * (1024.0 / n) * (1024.0 / n) * (1024.0 / n))));
	return 0;
}
