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
#include <cstring>
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

// Runs shorter than this are gathered, several to a block: a row operand broadcast
// along a transformer's rows of 32-64 (attention's probabilities, a layer norm's
// weight gradient) makes every row a run, and per run the steps' calls cost more
// than their elements. Gathering copies each input once more; the steps see the
// same elements in the same order of operations, so the bits are the same.
constexpr int64_t kGatherBelow = kBlock / 4;

// A thread's buffers for one chain: converted inputs, step results, constants, and
// the short runs waiting for a block. Kept per thread across commands (~90 KiB):
// on a stack frame per run they cost its page probes on every one of a broadcast
// operand's short runs.
struct ChainBuffers {
	float in[NEURON_PW_MAX_INPUTS][kBlock];
	float out[NEURON_PW_MAX_STEPS][kBlock];
	float cst[NEURON_MAX_SCALARS][kBlock];
	std::byte *run_ptr[kBlock][NEURON_PW_MAX_INPUTS + 1]; // each gathered run's first element per operand
	int64_t run_len[kBlock];
	int64_t run_stride[NEURON_PW_MAX_INPUTS + 1]; // along a run (the same for every run of a command)
	int runs = 0;
	int64_t gathered = 0; // elements in the gathered runs
};

ChainBuffers &chain_buffers()
{
	thread_local std::unique_ptr<ChainBuffers> b = std::make_unique<ChainBuffers>();
	return *b;
}

// Runs the steps over n elements whose inputs val[] points at (constants included);
// the last step into `last` unless it is null. Returns the last step's values.
const float *eval_steps(ChainBuffers &buf, const PointwiseSteps &steps, const float **val, float *last, int64_t n)
{
	const float *result = nullptr;
	for (int t = 0; t < steps.count; ++t) {
		const PointwiseStep &st = steps.step[t];
		float *o = last && t == steps.count - 1 ? last : buf.out[t];
		pw_eval(st.fn, o, val[st.a], pw_binary(st.fn) ? val[st.b] : val[st.a], n);
		val[NEURON_PW_VALUE_STEP0 + t] = o;
		result = o;
	}
	return result;
}

NK_HOT void fill_f32(float *dst, float v, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		dst[i] = v;
}

// n elements of an input as f32 into dst: the f32 cases (a row's copy, a value
// broadcast along the run) without load_block's dtype dispatch, which costs more
// than a short run's elements.
void read_input(float *dst, const std::byte *src, int64_t stride, int64_t n, uint8_t dtype)
{
	if (dtype == NEURON_DTYPE_F32 && stride == 0)
		fill_f32(dst, *reinterpret_cast<const float *>(src), n);
	else if (dtype == NEURON_DTYPE_F32 && stride == static_cast<int64_t>(sizeof(float)))
		std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
	else
		load_block<float>(dst, src, stride, n, dtype);
}

void point_at_constants(ChainBuffers &buf, const float **val)
{
	for (int c = 0; c < NEURON_MAX_SCALARS; ++c)
		val[NEURON_PW_VALUE_CONST0 + c] = buf.cst[c];
}

// One block of n <= kBlock elements (q: one pointer per operand, s: their byte
// strides along the block). f32 inputs and outputs contiguous along the block are
// used in place, other inputs are converted into the thread's buffers.
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
		read_input(buf.in[k - 1], q[k], s[k], n, v[k].dtype);
		val[k - 1] = buf.in[k - 1];
	}
	point_at_constants(buf, val);
	// The last step writes into out when it is f32 and contiguous (every input of
	// the block was read by then, at the same element: in place is exact).
	const bool direct = v[0].dtype == NEURON_DTYPE_F32 && s[0] == static_cast<int64_t>(sizeof(float));
	const float *result = eval_steps(buf, steps, val, direct ? reinterpret_cast<float *>(q[0]) : nullptr, n);
	if (!direct)
		store_block<float>(q[0], s[0], result, n, v[0].dtype);
}

// Evaluates the gathered runs as one block: every input of every run read into
// the block, then the steps, then each run's part stored (an output that is an
// input's exact view is read before it is written, element for element).
template <int N> void flush_runs(ChainBuffers &buf, const PointwiseSteps &steps, std::span<const View> v)
{
	if (buf.runs == 0)
		return;
	const float *val[NEURON_PW_VALUE_CONST0 + NEURON_MAX_SCALARS] = {};
	for (int k = 1; k < N; ++k) {
		int64_t at = 0;
		for (int r = 0; r < buf.runs; ++r) {
			read_input(buf.in[k - 1] + at, buf.run_ptr[r][k], buf.run_stride[k], buf.run_len[r], v[k].dtype);
			at += buf.run_len[r];
		}
		val[k - 1] = buf.in[k - 1];
	}
	point_at_constants(buf, val);
	const float *result = eval_steps(buf, steps, val, nullptr, buf.gathered);
	const bool f32_rows = v[0].dtype == NEURON_DTYPE_F32 && buf.run_stride[0] == static_cast<int64_t>(sizeof(float));
	for (int r = 0; r < buf.runs; ++r) {
		if (f32_rows)
			std::memcpy(buf.run_ptr[r][0], result, static_cast<size_t>(buf.run_len[r]) * sizeof(float));
		else
			store_block<float>(buf.run_ptr[r][0], buf.run_stride[0], result, buf.run_len[r], v[0].dtype);
		result += buf.run_len[r];
	}
	buf.runs = 0;
	buf.gathered = 0;
}

template <int N>
void run_chain(const PointwiseSteps &steps, const float (&consts)[NEURON_MAX_SCALARS], std::span<const View> v,
	       int max_threads)
{
	pointwise<N>(
		v, max_threads,
		[&](std::byte *const *q, const int64_t *s, int64_t n) {
			ChainBuffers &buf = chain_buffers();
			if (n >= kGatherBelow) {
				eval_block<N>(buf, steps, v, q, s, n);
				return;
			}
			if (buf.gathered + n > kBlock)
				flush_runs<N>(buf, steps, v);
			for (int k = 0; k < N; ++k) {
				buf.run_ptr[buf.runs][k] = q[k];
				buf.run_stride[k] = s[k];
			}
			buf.run_len[buf.runs++] = n;
			buf.gathered += n;
		},
		[&] {
			ChainBuffers &buf = chain_buffers();
			for (int c = 0; c < NEURON_MAX_SCALARS; ++c)
				std::fill(buf.cst[c], buf.cst[c] + kBlock, consts[c]);
		},
		[&] { flush_runs<N>(chain_buffers(), steps, v); });
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
