// Elementwise ops: binary (ADD/SUB with alpha, MUL, DIV), their scalar forms, and
// the unary activations (RELU, GELU, SILU, TANH, EXP).
//
// As in PyTorch after type promotion, arithmetic happens in the output dtype's
// compute type: float for f32/bf16/f16 outputs, int64 (wrapping) for integer and
// bool outputs; each input is first cast from its own dtype. Runs where every
// operand is contiguous in the compute type's own dtype (f32 or i64) are computed
// in place on the operands; everything else goes through small conversion blocks
// (block.h).
#include "block.h"
#include "iterate.h"
#include "ops.h"
#include "parallel.h"
#include "pointwise_math.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace neuron::kernels::detail {

namespace {

enum class Ew { Add, Sub, Mul, Div, AddS, SubS, RSubS, MulS, DivS, RDivS, Relu, GeluErf, GeluTanh, Silu, Tanh, Exp };

struct EwOp {
	Ew kind;
	int nin;
	float alpha_f = 1, s_f = 0; // floating outputs
	int64_t alpha_i = 1, s_i = 0; // integer outputs
};

NK_HOT void f_add(float *o, const float *a, const float *b, float alpha, int64_t n)
{
	if (alpha == 1.0f)
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] + b[i];
	else
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] + alpha * b[i];
}
NK_HOT void f_sub(float *o, const float *a, const float *b, float alpha, int64_t n)
{
	if (alpha == 1.0f)
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] - b[i];
	else
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] - alpha * b[i];
}
NK_HOT void f_mul(float *o, const float *a, const float *b, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		o[i] = a[i] * b[i];
}
NK_HOT void f_div(float *o, const float *a, const float *b, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		o[i] = a[i] / b[i];
}
NK_HOT void f_scalar(Ew k, float *o, const float *a, float s, int64_t n)
{
	switch (k) {
	case Ew::AddS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] + s;
		break;
	case Ew::SubS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] - s;
		break;
	case Ew::RSubS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = s - a[i];
		break;
	case Ew::MulS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] * s;
		break;
	case Ew::DivS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] / s;
		break;
	default: // RDivS
		for (int64_t i = 0; i < n; ++i)
			o[i] = s / a[i];
		break;
	}
}
NK_HOT void f_relu(float *o, const float *a, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		o[i] = pw_relu(a[i]);
}

// exp-based activations use the vectorisable exp_f32 (vmath.h).
NK_HOT void f_exp_based(Ew k, float *o, const float *a, int64_t n)
{
	if (k == Ew::Exp)
		for (int64_t i = 0; i < n; ++i)
			o[i] = exp_f32(a[i]);
	else // Silu
		for (int64_t i = 0; i < n; ++i)
			o[i] = pw_silu(a[i]);
}

NK_HOT void f_gelu_erf(float *o, const float *a, int64_t n)
{
	for (int64_t i = 0; i < n; ++i)
		o[i] = pw_gelu_erf(a[i]);
}

// tanh activations: libm calls dominate, no point cloning these.
void f_unary(Ew k, float *o, const float *a, int64_t n)
{
	switch (k) {
	case Ew::GeluErf:
		f_gelu_erf(o, a, n);
		break;
	case Ew::GeluTanh:
		for (int64_t i = 0; i < n; ++i)
			o[i] = pw_gelu_tanh(a[i]);
		break;
	case Ew::Silu:
	case Ew::Exp:
		f_exp_based(k, o, a, n);
		break;
	default: // Tanh
		for (int64_t i = 0; i < n; ++i)
			o[i] = std::tanh(a[i]);
		break;
	}
}

void compute(const EwOp &op, float *o, const float *const *in, int64_t n)
{
	switch (op.kind) {
	case Ew::Add:
		return f_add(o, in[0], in[1], op.alpha_f, n);
	case Ew::Sub:
		return f_sub(o, in[0], in[1], op.alpha_f, n);
	case Ew::Mul:
		return f_mul(o, in[0], in[1], n);
	case Ew::Div:
		return f_div(o, in[0], in[1], n);
	case Ew::Relu:
		return f_relu(o, in[0], n);
	case Ew::AddS:
	case Ew::SubS:
	case Ew::RSubS:
	case Ew::MulS:
	case Ew::DivS:
	case Ew::RDivS:
		return f_scalar(op.kind, o, in[0], op.s_f, n);
	default:
		return f_unary(op.kind, o, in[0], n);
	}
}

// Integer outputs: two's complement wrap-around (computed in uint64 to stay clear
// of signed-overflow UB), then the store wraps to the output's width.
void compute(const EwOp &op, int64_t *o, const int64_t *const *in, int64_t n)
{
	using u = uint64_t;
	const int64_t *a = in[0], *b = in[1];
	const u alpha = static_cast<u>(op.alpha_i), s = static_cast<u>(op.s_i);
	switch (op.kind) {
	case Ew::Add:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) + alpha * static_cast<u>(b[i]));
		break;
	case Ew::Sub:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) - alpha * static_cast<u>(b[i]));
		break;
	case Ew::Mul:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) * static_cast<u>(b[i]));
		break;
	case Ew::AddS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) + s);
		break;
	case Ew::SubS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) - s);
		break;
	case Ew::RSubS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(s - static_cast<u>(a[i]));
		break;
	case Ew::MulS:
		for (int64_t i = 0; i < n; ++i)
			o[i] = static_cast<int64_t>(static_cast<u>(a[i]) * s);
		break;
	default: // Relu (division and the float activations are rejected for integers)
		for (int64_t i = 0; i < n; ++i)
			o[i] = a[i] < 0 ? 0 : a[i];
		break;
	}
}

// A binary op whose run has one input broadcast along it (stride 0: a row's mean
// or scale in a layer norm, a row maximum in a softmax) and the other input and
// the output contiguous f32: the scalar form with that value, the same arithmetic
// per element (a + alpha * b0 rounds alpha * b0 as the vector form rounds alpha *
// b[i]; IEEE add and multiply are commutative), instead of a block copy of the
// value per 256 elements. False where no scalar form gives the same bits.
bool broadcast_run(const EwOp &op, const uint8_t *dt, std::byte *const *p, const int64_t *s, int64_t n)
{
	constexpr uint8_t f32 = NEURON_DTYPE_F32;
	if (dt[1] != f32 || dt[2] != f32 || op.kind > Ew::Div)
		return false;
	const bool b0 = s[2] == 0 && s[1] == 4, a0 = s[1] == 0 && s[2] == 4;
	// Add and sub with alpha scale b: a broadcast a has no scalar form then.
	if (!b0 && !(a0 && (op.alpha_f == 1.0f || op.kind == Ew::Mul || op.kind == Ew::Div)))
		return false;
	float v;
	std::memcpy(&v, p[b0 ? 2 : 1], sizeof v);
	const float *x = reinterpret_cast<const float *>(p[b0 ? 1 : 2]);
	float *o = reinterpret_cast<float *>(p[0]);
	switch (op.kind) {
	case Ew::Add:
		f_scalar(Ew::AddS, o, x, op.alpha_f == 1.0f ? v : op.alpha_f * v, n);
		break;
	case Ew::Sub:
		if (b0)
			f_scalar(Ew::SubS, o, x, op.alpha_f == 1.0f ? v : op.alpha_f * v, n);
		else
			f_scalar(Ew::RSubS, o, x, v, n);
		break;
	case Ew::Mul:
		f_scalar(Ew::MulS, o, x, v, n);
		break;
	default: // Div
		f_scalar(b0 ? Ew::DivS : Ew::RDivS, o, x, v, n);
		break;
	}
	return true;
}

// One run of the iteration: operand 0 is the output, 1..nin the inputs.
template <class C>
void ew_run(const EwOp &op, const uint8_t *dt, std::byte *const *p, const int64_t *s, int64_t n)
{
	constexpr uint8_t nat = native_dtype<C>();
	constexpr int64_t csz = sizeof(C);
	bool direct[3];
	bool all_direct = true;
	for (int k = 0; k <= op.nin; ++k) {
		direct[k] = dt[k] == nat && s[k] == csz;
		all_direct = all_direct && direct[k];
	}
	if (all_direct) { // the fast path: no copies at all
		const C *in[2] = {reinterpret_cast<const C *>(p[1]),
				  op.nin > 1 ? reinterpret_cast<const C *>(p[2]) : nullptr};
		compute(op, reinterpret_cast<C *>(p[0]), in, n);
		return;
	}
	if constexpr (std::is_same_v<C, float>)
		if (op.nin == 2 && direct[0] && broadcast_run(op, dt, p, s, n))
			return;
	C buf[3][kBlock];
	for (int64_t off = 0; off < n; off += kBlock) {
		const int64_t m = std::min(kBlock, n - off);
		const C *in[2] = {nullptr, nullptr};
		for (int k = 1; k <= op.nin; ++k) {
			const std::byte *src = p[k] + off * s[k];
			if (direct[k]) {
				in[k - 1] = reinterpret_cast<const C *>(src);
			} else {
				load_block<C>(buf[k], src, s[k], m, dt[k]);
				in[k - 1] = buf[k];
			}
		}
		std::byte *dst = p[0] + off * s[0];
		C *o = direct[0] ? reinterpret_cast<C *>(dst) : buf[0];
		compute(op, o, in, m);
		if (!direct[0])
			store_block<C>(dst, s[0], buf[0], m, dt[0]);
	}
}

EwOp decode(const neuron_cmd &cmd, bool floating_out)
{
	EwOp op{Ew::Add, 2};
	const double f0 = cmd.fscalars.f[0];
	const bool rev = cmd.iscalars[0] != 0;
	switch (cmd.opcode) {
	case NEURON_OP_ADD:
		op.kind = Ew::Add;
		break;
	case NEURON_OP_SUB:
		op.kind = Ew::Sub;
		break;
	case NEURON_OP_MUL:
		op.kind = Ew::Mul;
		break;
	case NEURON_OP_DIV:
		op.kind = Ew::Div;
		break;
	case NEURON_OP_ADD_SCALAR:
		op.kind = Ew::AddS;
		break;
	case NEURON_OP_SUB_SCALAR:
		op.kind = rev ? Ew::RSubS : Ew::SubS;
		break;
	case NEURON_OP_MUL_SCALAR:
		op.kind = Ew::MulS;
		break;
	case NEURON_OP_DIV_SCALAR:
		op.kind = rev ? Ew::RDivS : Ew::DivS;
		break;
	case NEURON_OP_RELU:
		op.kind = Ew::Relu;
		break;
	case NEURON_OP_GELU:
		op.kind = cmd.iscalars[0] ? Ew::GeluTanh : Ew::GeluErf;
		break;
	case NEURON_OP_SILU:
		op.kind = Ew::Silu;
		break;
	case NEURON_OP_TANH:
		op.kind = Ew::Tanh;
		break;
	default:
		op.kind = Ew::Exp;
		break;
	}
	op.nin = cmd.opcode <= NEURON_OP_DIV ? 2 : 1;
	if (cmd.opcode == NEURON_OP_ADD || cmd.opcode == NEURON_OP_SUB) {
		// check_semantics guarantees f0 is integral for integer outputs.
		op.alpha_f = static_cast<float>(f0);
		op.alpha_i = floating_out ? 0 : float_to_i64(f0);
	} else if (cmd.opcode >= NEURON_OP_ADD_SCALAR && cmd.opcode <= NEURON_OP_DIV_SCALAR) {
		// Like PyTorch, the double scalar is rounded to the compute type first.
		op.s_f = static_cast<float>(f0);
		op.s_i = cmd.iscalars[1];
	}
	return op;
}

bool is_transcendental(Ew k) { return k >= Ew::GeluErf; }

} // namespace

Result run_elementwise(const neuron_cmd &cmd, std::span<const View> v, int max_threads)
{
	const bool floating_out = is_floating(v[0].dtype);
	const EwOp op = decode(cmd, floating_out);
	const int nops = op.nin + 1;

	// Three operand slots always; a unary op repeats its input in slot 2 (unused).
	const View &b = nops > 2 ? v[2] : v[1];
	const int64_t *strides[3] = {v[0].strides, v[1].strides, b.strides};
	const size_t esz[3] = {dtype_size(v[0].dtype), dtype_size(v[1].dtype), dtype_size(b.dtype)};
	std::byte *ptrs[3] = {v[0].data, v[1].data, b.data};
	const uint8_t dt[3] = {static_cast<uint8_t>(v[0].dtype), static_cast<uint8_t>(v[1].dtype),
			       static_cast<uint8_t>(b.dtype)};
	const auto it = make_iter<3>(v[0].ndim, v[0].sizes, strides, esz, ptrs);

	const int64_t grain = is_transcendental(op.kind) ? kElementwiseGrain / 8 : kElementwiseGrain;
	const int nt = threads_for(it.numel, grain, max_threads);
	// Tiling hook: a bounded tile of this op is just a sub-range [b, e) of it.numel.
	parallel_ranges(it.numel, nt, [&](int64_t begin, int64_t end, int) {
		for_each_run(it, begin, end, [&](std::byte *const *p, const int64_t *s, int64_t n) {
			if (floating_out)
				ew_run<float>(op, dt, p, s, n);
			else
				ew_run<int64_t>(op, dt, p, s, n);
		});
	});
	return std::nullopt;
}

} // namespace neuron::kernels::detail
