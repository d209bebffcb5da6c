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

#include <algorithm>
#include <memory>

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

// A thread's buffers for one chain: converted inputs, step results, constants.
// Kept per thread across commands (~60 KiB): on a stack frame per run they cost
// its page probes on every one of a broadcast operand's short runs.
struct ChainBuffers {
	float in[NEURON_PW_MAX_INPUTS][kBlock];
	float out[NEURON_PW_MAX_STEPS][kBlock];
	float cst[NEURON_MAX_SCALARS][kBlock];
};

ChainBuffers &chain_buffers()
{
	thread_local std::unique_ptr<ChainBuffers> b = std::make_unique<ChainBuffers>();
	return *b;
}

// One block of n <= kBlock elements (q: one pointer per operand, s: their byte
// strides along the block). f32 inputs and outputs contiguous along the block are
// used in place, other inputs are converted into the thread's buffers. Copying
// every input and every constant per block was most of a layer norm's time on its
// rows of 64 (a broadcast operand makes runs as short as a row).
template <int N>
void eval_block(ChainBuffers &buf, const PointwiseSteps &steps, std::span<const View> v, std::byte *const *q,
		const int64_t *s, int64_t n)
{
	const float *val[NEURON_PW_VALUE_CONST0 + NEURON_MAX_SCALARS] = {};
	for (int k = 1; k < N; ++k) {
		if (v[k].dtype == NEURON_DTYPE_F32 && s[k] == static_cast<int64_t>(sizeof(float))) {
			val[k - 1] = reinterpret_cast<const float *>(q[k]);
			continue;
		}
		load_block<float>(buf.in[k - 1], q[k], s[k], n, v[k].dtype);
		val[k - 1] = buf.in[k - 1];
	}
	for (int c = 0; c < NEURON_MAX_SCALARS; ++c)
		val[NEURON_PW_VALUE_CONST0 + c] = buf.cst[c];
	// The last step writes into out when it is f32 and contiguous (every input of
	// the block was read by then, at the same element: in place is exact).
	const bool direct = v[0].dtype == NEURON_DTYPE_F32 && s[0] == static_cast<int64_t>(sizeof(float));
	for (int t = 0; t < steps.count; ++t) {
		const PointwiseStep &st = steps.step[t];
		float *o = direct && t == steps.count - 1 ? reinterpret_cast<float *>(q[0]) : buf.out[t];
		pw_eval(st.fn, o, val[st.a], pw_binary(st.fn) ? val[st.b] : val[st.a], n);
		val[NEURON_PW_VALUE_STEP0 + t] = o;
	}
	if (!direct)
		store_block<float>(q[0], s[0], buf.out[steps.count - 1], n, v[0].dtype);
}

template <int N>
void run_chain(const PointwiseSteps &steps, const float (&consts)[NEURON_MAX_SCALARS], std::span<const View> v,
	       int max_threads)
{
	pointwise<N>(
		v, max_threads,
		[&](std::byte *const *q, const int64_t *s, int64_t n) { eval_block<N>(chain_buffers(), steps, v, q, s, n); },
		[&] {
			ChainBuffers &buf = chain_buffers();
			for (int c = 0; c < NEURON_MAX_SCALARS; ++c)
				std::fill(buf.cst[c], buf.cst[c] + kBlock, consts[c]);
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
