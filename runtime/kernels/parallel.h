// Splitting one op's work among at most max_threads host threads.
//
// Small ops run inline on the calling (engine) thread: entering an OpenMP region
// costs microseconds, more than an add of a few thousand floats, and on a busy
// host (many engines, few CPUs) a region can stall for a scheduler time slice
// waiting for a descheduled worker. So only work of at least `grain` units per
// thread (~50 us or more) is spread out.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace neuron::kernels {

// Elements per thread below which splitting an elementwise op or a reduction
// does not pay (ops with exp/erf/tanh per element use 1/8 of it). Sized so one
// thread's share is ~0.5 ms: on a host shared with other work a region's worker
// can wait a scheduler slice (1-4 ms measured) to run, which a training step's
// mid-sized ops (16k-64k elements) paid many times over at 1/4 of this grain.
inline constexpr int64_t kElementwiseGrain = int64_t{1} << 19;

inline int threads_for(int64_t work, int64_t grain, int max_threads)
{
	if (max_threads <= 1 || work < 2 * grain)
		return 1;
	return static_cast<int>(std::min<int64_t>(max_threads, work / grain));
}

// Calls f(begin, end, thread_index) on disjoint ranges covering [0, total).
// f must not throw.
template <class F> void parallel_ranges(int64_t total, int nthreads, F &&f)
{
	if (nthreads <= 1) {
		f(int64_t{0}, total, 0);
		return;
	}
#pragma omp parallel num_threads(nthreads)
	{
		const int t = omp_get_thread_num();
		const int n = omp_get_num_threads();
		const int64_t b = total / n * t + std::min<int64_t>(t, total % n);
		const int64_t e = b + total / n + (t < total % n ? 1 : 0);
		f(b, e, t);
	}
}

} // namespace neuron::kernels
