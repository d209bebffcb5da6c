// ISA 1.4 AMP grad scaling: AMP_UNSCALE and AMP_UPDATE_SCALE (cmd.h), the two
// kernels torch.amp.GradScaler runs each step, with PyTorch's arithmetic
// (_amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ in
// aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp): the check reads the
// scaled value, the product is taken in f32, the scale update in double.
#include "ops.h"
#include "pointwise.h"

#include <atomic>
#include <ctime>
#include <cmath>

namespace neuron::kernels::detail {

Result run_amp_unscale(const neuron_cmd &, std::span<const View> v, int max_threads)
{
	const float inv_scale = ld<float>(v[2].data);
	const uint8_t dt = static_cast<uint8_t>(v[0].dtype);
	std::atomic<bool> found{false};
	pointwise<1>(v.first(1), max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		float g[kBlock];
		load_block<float>(g, q[0], s[0], n, dt);
		bool bad = false;
		for (int64_t i = 0; i < n; ++i) {
			bad |= !std::isfinite(g[i]);
			g[i] = inv_scale == 1.0f ? g[i] : g[i] * inv_scale;
		}
		if (bad)
			found.store(true, std::memory_order_relaxed);
		store_block<float>(q[0], s[0], g, n, dt);
	});
	if (found.load())
		st<float>(v[1].data, 1.0f);
	return std::nullopt;
}

Result run_amp_update_scale(const neuron_cmd &cmd, std::span<const View> v, int)
{
	float scale = ld<float>(v[0].data);
	int32_t tracker = ld<int32_t>(v[1].data);
	const double growth = cmd.fscalars.f[0], backoff = cmd.fscalars.f[1];
	if (ld<float>(v[2].data) != 0.0f) {
		scale = static_cast<float>(scale * backoff);
		tracker = 0;
	} else if (tracker + int64_t{1} == cmd.iscalars[0]) {
		const float grown = static_cast<float>(scale * growth);
		if (std::isfinite(grown))
			scale = grown;
		tracker = 0;
	} else {
		++tracker;
	}
	st<float>(v[0].data, scale);
	st<int32_t>(v[1].data, tracker);
	return std::nullopt;
}

// TIMESTAMP: the engine runs commands of a queue in order, one at a time, so
// the clock read here is when the queue reached this command.
Result run_timestamp(const View &out)
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	st<int64_t>(out.data, static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
	return std::nullopt;
}

} // namespace neuron::kernels::detail
