// POINTWISE (cmd.h, ISA 1.5): a fused chain of up to 16 pointwise steps. Each
// block of elements is loaded once per input, every step runs over the block in
// f32 (the formulas of pointwise_math.h, the unfused kernels' own), and only the
// last step is stored: a chain of k elementwise ops reads and writes memory once
// instead of k times, and is one command instead of k.
#include "block.h"
#include "ops.h"
#include "pointwise.h"
#include "pointwise_math.h"
#include "pointwise_steps.h"

namespace neuron::kernels {

NK_HOT void pw_eval(uint8_t fn, float *o, const float *a, const float *b, int64_t n)
{
	switch (fn) {
	case NEURON_PW_ADD: for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i]; break;
	case NEURON_PW_SUB: for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b[i]; break;
	case NEURON_PW_MUL: for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b[i]; break;
	case NEURON_PW_DIV: for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i]; break;
	case NEURON_PW_MAXIMUM:
	case NEURON_PW_MINIMUM:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<float>(pw_max_min(a[i], b[i], fn == NEURON_PW_MAXIMUM));
		break;
	case NEURON_PW_POW: for (int64_t i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]); break;
	case NEURON_PW_RELU: for (int64_t i = 0; i < n; ++i) o[i] = pw_relu(a[i]); break;
	case NEURON_PW_GELU: for (int64_t i = 0; i < n; ++i) o[i] = pw_gelu_erf(a[i]); break;
	case NEURON_PW_GELU_TANH: for (int64_t i = 0; i < n; ++i) o[i] = pw_gelu_tanh(a[i]); break;
	case NEURON_PW_SILU: for (int64_t i = 0; i < n; ++i) o[i] = pw_silu(a[i]); break;
	case NEURON_PW_TANH: for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(a[i]); break;
	case NEURON_PW_EXP: for (int64_t i = 0; i < n; ++i) o[i] = exp_f32(a[i]); break;
	case NEURON_PW_LOG: for (int64_t i = 0; i < n; ++i) o[i] = std::log(a[i]); break;
	case NEURON_PW_SQRT: for (int64_t i = 0; i < n; ++i) o[i] = std::sqrt(a[i]); break;
	case NEURON_PW_RSQRT: for (int64_t i = 0; i < n; ++i) o[i] = pw_rsqrt(a[i]); break;
	case NEURON_PW_ABS: for (int64_t i = 0; i < n; ++i) o[i] = std::fabs(a[i]); break;
	case NEURON_PW_SIGMOID: for (int64_t i = 0; i < n; ++i) o[i] = pw_sigmoid(a[i]); break;
	case NEURON_PW_ERF: for (int64_t i = 0; i < n; ++i) o[i] = std::erf(a[i]); break;
	case NEURON_PW_RECIPROCAL: for (int64_t i = 0; i < n; ++i) o[i] = 1.0f / a[i]; break;
	case NEURON_PW_NEG: for (int64_t i = 0; i < n; ++i) o[i] = -a[i]; break;
	case NEURON_PW_THRESHOLD_BACKWARD: for (int64_t i = 0; i < n; ++i) o[i] = b[i] > 0.0f ? a[i] : 0.0f; break;
	default: // GELU_BACKWARD
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] * pw_gelu_grad(b[i], false);
		break;
	}
}

} // namespace neuron::kernels

namespace neuron::kernels::detail {

namespace {

template <int N>
void run_chain(const PointwiseSteps &steps, const float (&consts)[NEURON_MAX_SCALARS], std::span<const View> v,
	       int max_threads)
{
	pointwise<N>(v, max_threads, [&](std::byte *const *q, const int64_t *s, int64_t n) {
		float in[N - 1][kBlock];
		float out[NEURON_PW_MAX_STEPS][kBlock];
		float cst[NEURON_MAX_SCALARS][kBlock];
		const float *val[NEURON_PW_VALUE_CONST0 + NEURON_MAX_SCALARS] = {};
		for (int k = 1; k < N; ++k) {
			load_block<float>(in[k - 1], q[k], s[k], n, v[k].dtype);
			val[k - 1] = in[k - 1];
		}
		for (int c = 0; c < NEURON_MAX_SCALARS; ++c) {
			for (int64_t i = 0; i < n; ++i)
				cst[c][i] = consts[c];
			val[NEURON_PW_VALUE_CONST0 + c] = cst[c];
		}
		for (int t = 0; t < steps.count; ++t) {
			const PointwiseStep &st = steps.step[t];
			pw_eval(st.fn, out[t], val[st.a], pw_binary(st.fn) ? val[st.b] : val[st.a], n);
			val[NEURON_PW_VALUE_STEP0 + t] = out[t];
		}
		store_block<float>(q[0], s[0], out[steps.count - 1], n, v[0].dtype);
	});
}

} // namespace

Result run_pointwise(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	PointwiseSteps steps;
	if (auto why = decode_steps(cmd, static_cast<int>(v.size()) - 1, &steps); !why.empty())
		return exec_fault("pointwise: " + why);
	float consts[NEURON_MAX_SCALARS];
	for (int c = 0; c < NEURON_MAX_SCALARS; ++c)
		consts[c] = static_cast<float>(cmd.fscalars.f[c]); // as the unfused scalar ops round them
	switch (v.size()) {
	case 2: run_chain<2>(steps, consts, v, max_threads); break;
	case 3: run_chain<3>(steps, consts, v, max_threads); break;
	case 4: run_chain<4>(steps, consts, v, max_threads); break;
	case 5: run_chain<5>(steps, consts, v, max_threads); break;
	default: run_chain<6>(steps, consts, v, max_threads); break;
	}
	return std::nullopt;
}

} // namespace neuron::kernels::detail
