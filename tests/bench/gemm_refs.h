// The references bench-runtime measures the chip's fp32 matmul against: every GEMM
// this host offers, timed in the same run, on the same n x n row-major f32
// product and the same thread count. The fastest is the reference; all are printed.
//
//   OpenBLAS  cblas_sgemm in-process, on the kernel set the runtime selects for the
//             CPU (runtime/kernels/blas_select.h);
//   BLIS      bli_sgemm from libblis.so.4 when installed (loaded with dlopen: its
//             BLAS symbols would clash with OpenBLAS's at link time), on its skx
//             kernels when the CPU has AVX-512 (BLIS 0.9 takes Haswell for CPU
//             models it does not know), else on its own choice;
//   PyTorch   torch.matmul, timed by torch_matmul.py in a python3 subprocess when
//             torch is importable (its CPU build multiplies with MKL/oneDNN).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace bench {

struct GemmRef {
	std::string name;    // "OpenBLAS 0.3.21 SkylakeX cblas_sgemm"
	double gflops = 0.0; // median over the runs; 0 when it could not run
	std::string note;    // why it could not run
};

class GemmRefs {
public:
	// python: the interpreter for the PyTorch reference ("" skips it);
	// torch_helper: the path of torch_matmul.py.
	GemmRefs(int threads, std::string python, std::string torch_helper);
	~GemmRefs();
	GemmRefs(const GemmRefs &) = delete;
	GemmRefs &operator=(const GemmRefs &) = delete;

	// Times c = a @ b (n x n) with every candidate, reps runs each after one
	// warm-up; c ends with OpenBLAS's product, for checking the device's result.
	std::vector<GemmRef> measure(int n, const float *a, const float *b, float *c, int reps);

	// The candidates' set-up, one line each, for the report's header.
	std::vector<std::string> describe() const;

private:
	struct Blis;
	GemmRef openblas(int n, const float *a, const float *b, float *c, int reps);
	GemmRef blis(int n, const float *a, const float *b, float *c, int reps);
	GemmRef torch(int n, int reps);

	int threads_;
	std::string python_, torch_helper_;
	std::unique_ptr<Blis> blis_;
};

// The fastest of the references that ran (null when none did).
const GemmRef *fastest(const std::vector<GemmRef> &refs);

} // namespace bench
