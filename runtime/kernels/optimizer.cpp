// ISA 1.2 fused optimizer step: ADAM_STEP (Adam and AdamW on one parameter).
//
// One command replaces the ~8 elementwise commands of torch.optim's foreach path
// per parameter, and reads every state tensor once. The arithmetic follows
// PyTorch's fused CPU kernel (FusedAdamKernel.cpp) step by step in f32 with the
// bias corrections in double, so results agree with torch.optim to rounding. The
// step count is an operand (a device tensor) so the host never waits to read it.
#include "ops.h"
#include "pointwise.h"

#include <cmath>
#include <cstring>

namespace neuron::kernels::detail {

Result run_adam_step(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	double t = 0;
	load_block<double>(&t, v[4].data, 0, 1, v[4].dtype);
	if (!(t >= 1) || t != std::floor(t))
		return exec_fault("adam_step: operand 4 (step) holds " + std::to_string(t) + "; the step count is an integer >= 1");
	const double lr = cmd.fscalars.f[0], beta1 = cmd.fscalars.f[1], beta2 = cmd.fscalars.f[2];
	double wd_d;
	std::memcpy(&wd_d, &cmd.iscalars[1], sizeof(wd_d));
	const bool decoupled = cmd.iscalars[0] & NEURON_ADAM_DECOUPLED, maximize = cmd.iscalars[0] & NEURON_ADAM_MAXIMIZE;
	const float step_size = static_cast<float>(lr / (1 - std::pow(beta1, t)));
	const float bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
	const float wd = static_cast<float>(wd_d), decay = static_cast<float>(1 - lr * wd_d);
	const float b2 = static_cast<float>(beta2);
	const float one_minus_b1 = static_cast<float>(1 - beta1), one_minus_b2 = static_cast<float>(1 - beta2);
	const float eps = static_cast<float>(cmd.fscalars.f[3]);
	const uint8_t dt[4] = {static_cast<uint8_t>(v[0].dtype), static_cast<uint8_t>(v[1].dtype),
			       static_cast<uint8_t>(v[2].dtype), static_cast<uint8_t>(v[3].dtype)};
	pointwise<4>(v.first(4), max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		float p[kBlock], m[kBlock], vs[kBlock], g[kBlock];
		load_block<float>(p, q[0], s[0], n, dt[0]);
		load_block<float>(m, q[1], s[1], n, dt[1]);
		load_block<float>(vs, q[2], s[2], n, dt[2]);
		load_block<float>(g, q[3], s[3], n, dt[3]);
		for (int64_t i = 0; i < n; ++i) {
			float gi = maximize ? -g[i] : g[i];
			float pi = p[i];
			if (wd != 0.0f) {
				if (decoupled)
					pi = pi * decay;
				else
					gi = gi + pi * wd;
			}
			const float mi = m[i] + one_minus_b1 * (gi - m[i]);
			const float vi = vs[i] * b2 + one_minus_b2 * gi * gi;
			const float denom = std::sqrt(vi) / bc2_sqrt + eps;
			m[i] = mi;
			vs[i] = vi;
			p[i] = pi - step_size * mi / denom;
		}
		store_block<float>(q[0], s[0], p, n, dt[0]);
		store_block<float>(q[1], s[1], m, n, dt[1]);
		store_block<float>(q[2], s[2], vs, n, dt[2]);
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
