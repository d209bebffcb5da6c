// The register kernels under the packed multiply (packed_gemm.h), one per x86
// instruction set, and the choice between them by the CPU's features.
//
// Why more than one: the packed multiply exists because a BLAS call per tile packs
// its operands again on every call (packed_gemm.h); that holds on every host, not
// only on AVX-512 ones. On an AVX2 + FMA host (AMD Zen 3 here) OpenBLAS per tile
// kept the chip's fp32 matmul at 0.66-0.81 of one whole-matrix OpenBLAS call
// (bench-runtime, issue 10); the AVX2 kernel over shared packs closes that gap.
//
// Shapes: mr rows of a x nr columns of b per call, kc steps of K. a's panel holds
// kc groups of mr floats, b's kc groups of nr floats (pack_panels in
// packed_gemm.cpp writes both, zero-padded past the matrix's edge).
#pragma once

#include <cstdint>
#include <string_view>

namespace neuron::kernels::detail {

// The part of the next panel of b that one kernel call brings into L2 while it
// runs: the kernel calls along a panel of b share the next panel out between them.
// Without it, the first kernel call on each panel of b waits for its panel from L3
// or memory (each panel is read once per kernel call, not as one stream the
// hardware prefetchers follow); bench-gemm shows the difference on the Xeon hosts.
struct NextPanel {
	const float *begin = nullptr, *end = nullptr;
};

// Floats in the largest kernel's register block (mr x nr): the packed multiply's
// scratch for blocks at the edge of c holds one.
inline constexpr int kMaxMicroBlock = 8 * 32;

struct MicroKernel {
	std::string_view name; // "AVX-512", "AVX2": what blas_description() prints
	int mr, nr;
	// c[0..rows) x [0..nr) = alpha * (a-panel @ b-panel) + beta * c, 1 <= rows <= mr;
	// beta == 0 writes without reading c (NaNs in it are ignored).
	void (*run)(int rows, int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha, float beta,
		    NextPanel next);
	// Packs mr rows of a row-major f32 matrix (row stride ld), kc columns, into
	// one panel (panel[k * mr + r] = x[r * ld + k]); nullptr: the generic packing.
	void (*pack_rows_f32)(const float *x, int64_t ld, int64_t kc, float *panel);
};

// Each null when the host cannot run it.
const MicroKernel *avx512_micro_kernel(); // micro_kernel_avx512.cpp: AVX-512F, 8 x 32
const MicroKernel *avx2_micro_kernel();   // micro_kernel_avx2.cpp: AVX2 + FMA, 6 x 16

// The kernel the packed multiply uses: the widest one the host runs, null when
// none (OpenBLAS then does every product).
const MicroKernel *active_micro_kernel();

// Tests and benchmarks: makes the named kernel ("AVX-512", "AVX2", or "" for the
// host's default) the active one, process-wide. False, and no change, when the
// host cannot run it. Only while no multiply runs.
bool use_micro_kernel(std::string_view name);

} // namespace neuron::kernels::detail
