// ISA 1.2 fused optimizer step: ADAM_STEP (Adam and AdamW on one parameter).
//
// One command replaces the ~8 elementwise commands of torch.optim's foreach path
// per parameter, and reads every state tensor once. The arithmetic follows
// PyTorch's fused CPU kernel (FusedAdamKernel.cpp) step by step in f32 with the
// bias corrections in double, so results agree with torch.optim to rounding. The
// step count is an operand (a device tensor) so the host never waits to read it.
#include "ops.h"
#include "pointwise.h"
#include "vmath.h"

#include <cmath>
#include <cstring>

namespace neuron::kernels::detail {

namespace {

// The per-element update's constants (f32, from the double bias corrections).
struct AdamStep {
	float step_size, bc2_sqrt, wd, decay, b2, one_minus_b1, one_minus_b2, eps;
	bool decoupled, maximize;
};

// The update of n elements in place, in the order of PyTorch's fused kernel. A
// template per weight-decay form so each loop has no branch on it: vectorised in
// the AVX-512 / AVX2 clones (the loop with the tests inside, over block copies,
// was ~5.6 ns an element: 10% of a transformer step's device time with fused AdamW).
enum class Decay { None, Decoupled, L2 };

template <Decay D>
[[gnu::always_inline]] inline void adam_rows(float *p, float *m, float *vs, const float *g, int64_t n,
					      const AdamStep &c)
{
	const float sign = c.maximize ? -1.0f : 1.0f;
	for (int64_t i = 0; i < n; ++i) {
		float gi = g[i] * sign; // exact: a sign flip
		float pi = p[i];
		if constexpr (D == Decay::Decoupled)
			pi = pi * c.decay;
		else if constexpr (D == Decay::L2)
			gi = gi + pi * c.wd;
		const float mi = m[i] + c.one_minus_b1 * (gi - m[i]);
		const float vi = vs[i] * c.b2 + c.one_minus_b2 * gi * gi;
		const float denom = std::sqrt(vi) / c.bc2_sqrt + c.eps;
		m[i] = mi;
		vs[i] = vi;
		p[i] = pi - c.step_size * mi / denom;
	}
}

NK_HOT void adam_update(float *p, float *m, float *vs, const float *g, int64_t n, const AdamStep &c)
{
	if (c.wd == 0.0f)
		adam_rows<Decay::None>(p, m, vs, g, n, c);
	else if (c.decoupled)
		adam_rows<Decay::Decoupled>(p, m, vs, g, n, c);
	else
		adam_rows<Decay::L2>(p, m, vs, g, n, c);
}

} // namespace

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
	AdamStep c;
	c.step_size = static_cast<float>(lr / (1 - std::pow(beta1, t)));
	c.bc2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
	c.wd = static_cast<float>(wd_d);
	c.decay = static_cast<float>(1 - lr * wd_d);
	c.b2 = static_cast<float>(beta2);
	c.one_minus_b1 = static_cast<float>(1 - beta1);
	c.one_minus_b2 = static_cast<float>(1 - beta2);
	c.eps = static_cast<float>(cmd.fscalars.f[3]);
	c.decoupled = decoupled;
	c.maximize = maximize;
	const uint8_t dt[4] = {static_cast<uint8_t>(v[0].dtype), static_cast<uint8_t>(v[1].dtype),
			       static_cast<uint8_t>(v[2].dtype), static_cast<uint8_t>(v[3].dtype)};
	pointwise<4>(v.first(4), max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		bool direct = true; // every operand contiguous f32: update in place, no copies
		for (int k = 0; k < 4; ++k)
			direct = direct && dt[k] == NEURON_DTYPE_F32 && s[k] == int64_t{sizeof(float)};
		if (direct) {
			adam_update(reinterpret_cast<float *>(q[0]), reinterpret_cast<float *>(q[1]),
				    reinterpret_cast<float *>(q[2]), reinterpret_cast<const float *>(q[3]), n, c);
			return;
		}
		float p[kBlock], m[kBlock], vs[kBlock], g[kBlock];
		load_block<float>(p, q[0], s[0], n, dt[0]);
		load_block<float>(m, q[1], s[1], n, dt[1]);
		load_block<float>(vs, q[2], s[2], n, dt[2]);
		load_block<float>(g, q[3], s[3], n, dt[3]);
		adam_update(p, m, vs, g, n, c);
		store_block<float>(q[0], s[0], p, n, dt[0]);
		store_block<float>(q[1], s[1], m, n, dt[1]);
		store_block<float>(q[2], s[2], vs, n, dt[2]);
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
