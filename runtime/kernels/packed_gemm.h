// The simulated Tensor engine's f32 multiply: c = alpha * a @ b + beta * c on
// operands packed into panels, with a register-blocked inner kernel for the host's
// instruction set (micro_kernel.h: AVX-512, else AVX2 + FMA).
//
// Why not a BLAS call per tile: the chip cuts a matmul into tiles of ~2^25
// multiply-adds so that a core can change tenants between them (tiling.h), and a
// BLAS call packs both of its operands again on every call; neither OpenBLAS nor
// BLIS has an API to keep packed panels across calls (MKL's sgemm_pack is not in
// Debian main). Packing each block once per command (gemm_packs.h) and running
// only the inner kernel per tile keeps the tiled multiply at BLAS speed
// (bench-runtime prints the ratio to the fastest GEMM on the host on the whole
// matrix; bench-gemm, to OpenBLAS on one thread).
//
// Used for f32 arithmetic on any input dtype (packing converts bf16/f16/integer
// inputs to f32, as the BLAS path's conversion buffers did) when the host has
// AVX-512F or AVX2 + FMA and the shape suits panels; OpenBLAS does everything else.
#pragma once

#include "gemm_packs.h"
#include "matrix.h"

#include <cstdint>

namespace neuron::kernels::detail {

// Whether this host can run the packed multiply (AVX-512F, or AVX2 and FMA).
bool packed_gemm_available();

// Whether packed_gemm serves an M x N x K product on this host.
bool packed_gemm_suits(int64_t M, int64_t N, int64_t K);

// c (row-major f32, leading dimension ldc, M x N) = alpha * a @ b + beta * c;
// beta == 0 ignores c's old contents (NaNs too). K must be > 0. packs may be null
// (every block is then packed into the calling thread's own buffer).
// Throws std::bad_alloc.
void packed_gemm(float alpha, const Mat &a, const Mat &b, float beta, float *c, int64_t ldc, GemmPacks *packs);

} // namespace neuron::kernels::detail
