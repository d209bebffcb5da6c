// Walking several same-shaped operands block by block, split among threads: the
// loop shared by the pointwise families (math.cpp, optimizer.cpp). body(q, s, n)
// gets one pointer per operand to a run of n <= kBlock elements and the operands'
// byte strides along that run.
#pragma once

#include "block.h"
#include "iterate.h"
#include "parallel.h"

#include <algorithm>
#include <span>

namespace neuron::kernels::detail {

struct NoRangeSetup {
	void operator()() const {}
};

// setup() runs on each thread before the blocks of its range (a thread's buffers),
// finish() after them (work a body deferred).
template <int N, class F, class Setup = NoRangeSetup, class Finish = NoRangeSetup>
void pointwise(std::span<const View> v, int max_threads, F &&body, Setup &&setup = {}, Finish &&finish = {})
{
	const int64_t *strides[N];
	size_t esz[N];
	std::byte *ptrs[N];
	for (int k = 0; k < N; ++k) {
		strides[k] = v[k].strides;
		esz[k] = dtype_size(v[k].dtype);
		ptrs[k] = v[k].data;
	}
	const auto it = make_iter<N>(v[0].ndim, v[0].sizes, strides, esz, ptrs);
	if (it.numel == 0)
		return;
	const int nt = threads_for(it.numel, kElementwiseGrain, max_threads);
	parallel_ranges(it.numel, nt, [&](int64_t b, int64_t e, int) {
		setup();
		for_each_run(it, b, e, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			for (int64_t off = 0; off < n; off += kBlock) {
				const int64_t m = std::min(kBlock, n - off);
				std::byte *q[N];
				for (int k = 0; k < N; ++k)
					q[k] = p[k] + off * s[k];
				body(q, s, m);
			}
		});
		finish();
	});
}

} // namespace neuron::kernels::detail
