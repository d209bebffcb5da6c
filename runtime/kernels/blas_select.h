// Which BLAS the kernels call and which of its kernel sets, chosen from the CPU's
// features, and one line that says so (neurond logs it at start, bench-runtime
// prints it).
//
// Why: Debian's OpenBLAS is built with DYNAMIC_ARCH. When it loads, it picks one of
// its kernel sets by CPU model (driver/others/dynamic.c, get_coretype()), and a
// model it does not know can land far below what the CPU can run: 0.3.21 sends
// every Intel family-6 model missing from its table (Emerald Rapids, model 0xcf,
// among them) to the Prescott (SSE3) kernels through a switch fall-through, ~6x
// slower in sgemm than its SkylakeX kernels on the same AVX-512 host.
//
// How: OPENBLAS_CORETYPE is OpenBLAS's documented way to name the kernel set, but
// the library reads it in its load-time constructor, before main() runs. OpenBLAS
// makes that choice in gotoblas_dynamic_init() (called by the constructor and
// exported by every DYNAMIC_ARCH build), which does nothing while a choice stands;
// gotoblas_dynamic_quit() clears it. select_blas() calls the pair with
// OPENBLAS_CORETYPE set, so the library runs its own selection again, through the
// same name lookup and parameter set-up as a process started with the variable, and
// reads the result back with openblas_get_corename(). Why not the alternatives:
// setting the variable in main() is too late; dlopen()ing OpenBLAS after setting it
// cannot serve the statically linked test programs of the QEMU suite; Debian's
// BLIS 0.9 mis-detects this CPU too (it takes Haswell for an unknown model), and
// MKL is not in Debian main.
//
// Policy: the library's own pick stands unless it targets an older instruction set
// than the CPU runs (the fall-back case above), or OPENBLAS_CORETYPE was set by the
// user (then the user's choice stands). The kernel set for the CPU's features is
// the rule of OpenBLAS's own fall-back for CPUs it cannot name, and of later
// OpenBLAS releases for AMD Zen 4: AVX-512 (F, CD, BW, DQ, VL) -> SkylakeX;
// AVX2 + FMA -> Haswell (Zen on AMD and Hygon); AVX -> Sandybridge (Intel).
//
// NEURON_MAX_CPU_ISA (after oneDNN's ONEDNN_MAX_CPU_ISA) caps the instruction set
// the chip's kernels and this choice may use: "avx512" (the default: all the CPU
// has) or "avx2" (as a host without AVX-512 runs: AMD Zen 1-3, Intel client
// parts). With the cap the packed multiply runs its AVX2 kernel and OpenBLAS its
// AVX2 kernel set even where it picked AVX-512 ones at load, so the AVX2 path can
// be measured on an AVX-512 host (bench-runtime, bench-gemm) as it runs elsewhere.
//
// Threads: select_blas() must run before the first BLAS call and before other
// threads read the environment (it sets and clears OPENBLAS_CORETYPE): neurond and
// bench-runtime call it first thing in main(); run_matmul() also calls it before
// its first BLAS call, for programs that do not. Later calls return the stored
// result.
#pragma once

#include <string>

namespace neuron::kernels {

// The x86 CPU as the BLAS choice sees it. Off x86, vendor is empty and every
// feature false.
struct CpuFeatures {
	std::string vendor; // CPUID vendor string: "GenuineIntel", "AuthenticAMD", ...
	int family = 0, model = 0; // as Linux shows them (extended fields folded in)
	bool avx = false, avx2 = false, fma = false;
	// F, CD, BW, DQ and VL, with the OS saving the zmm state: what OpenBLAS's
	// SkylakeX kernels and the packed GEMM (packed_gemm.h) need.
	bool avx512 = false;
	std::string cap; // "avx2" when NEURON_MAX_CPU_ISA hid newer features, else ""
};

// The CPU's features under NEURON_MAX_CPU_ISA (an invalid value caps nothing;
// neurond refuses to start on it, see isa_cap_error).
CpuFeatures host_cpu_features();

// Caps f at the instruction set `value` names (NEURON_MAX_CPU_ISA's values, any
// case; null or "" caps nothing). Returns what is wrong with the value, "" if
// nothing, and leaves f as it was then.
std::string apply_isa_cap(CpuFeatures &f, const char *value);

// What is wrong with the environment's NEURON_MAX_CPU_ISA, "" if nothing.
std::string isa_cap_error();

// The OpenBLAS kernel set (an OPENBLAS_CORETYPE name) for a CPU with these
// features, or "" when the choice is best left to OpenBLAS's model table (no AVX;
// AMD with AVX but not AVX2).
std::string openblas_kernel_for(const CpuFeatures &cpu);

// The instruction-set level an OpenBLAS kernel set targets: 3 AVX-512, 2 AVX2,
// 1 AVX, 0 older; -1 for a name this table does not know.
int openblas_kernel_level(const std::string &kernel);

struct BlasSelection {
	std::string library;  // "OpenBLAS 0.3.21 (pthreads)"
	std::string kernel;   // in use after the selection: "SkylakeX"
	std::string at_load;  // what the library had picked when it loaded
	std::string wanted;   // openblas_kernel_for(cpu) ("" = no opinion)
	std::string reason;   // why `kernel` is in use, one phrase
	CpuFeatures cpu;
};

// Runs the selection once (see the top of this file) and returns its result.
const BlasSelection &select_blas();

// select_blas() as one line, with the chip's own matmul kernel:
// "OpenBLAS 0.3.21 (pthreads), kernels SkylakeX: chosen from the CPU's features
//  (OpenBLAS picked Prescott at load); CPU GenuineIntel family 6 model 0xcf:
//  AVX-512 AVX2 FMA AVX; chip matmul: packed AVX-512 GEMM, BLAS for thin products".
std::string blas_description();

} // namespace neuron::kernels
