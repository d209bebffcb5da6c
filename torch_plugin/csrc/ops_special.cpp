// The ISA 1.4 functions of UNARY_MATH / BINARY_MATH as ATen ops: trigonometry,
// logs and exponentials, rounding, special functions, the parametrised
// activations and their backwards, and the binary math ops (atan2, fmod,
// remainder, hypot, copysign, logaddexp, xlogy, nextafter, floor division).
// Each is one chip command; integer and other dtypes the chip does not compute go
// to the CPU (counted as a fallback).
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

struct MathArgs {
	double f0 = 0, f1 = 0, f2 = 0;
	int64_t i1 = 0;
};

// out = fn(self) on the chip, or on the CPU (cpu(self_cpu)) when the chip cannot.
template <class CpuFn>
Tensor &unary_into(const char *name, int fn, Tensor &out, const Tensor &self, CpuFn cpu, MathArgs a = {})
{
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !float_dev(out)) {
		note_fallback(name);
		out.copy_(cpu(self.cpu()));
		return out;
	}
	math_cmd(out, self, fn, a.f0, a.f1, a.i1, a.f2);
	return out;
}

// Float-valued unary ops (integer inputs give the default float dtype).
#define UNARY_FN(name, FN)                                                                                          \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                           \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_into(#name, FN, out, self, [](const Tensor &x) { return at::name(x); });              \
	}                                                                                                           \
	Tensor name##_f(const Tensor &self)                                                                         \
	{                                                                                                           \
		Tensor out = float_out_like(self);                                                                  \
		return name##_o(self, out);                                                                         \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self) { return name##_o(self, self); }

UNARY_FN(sin, NEURON_UNARY_SIN)
UNARY_FN(cos, NEURON_UNARY_COS)
UNARY_FN(tan, NEURON_UNARY_TAN)
UNARY_FN(asin, NEURON_UNARY_ASIN)
UNARY_FN(acos, NEURON_UNARY_ACOS)
UNARY_FN(atan, NEURON_UNARY_ATAN)
UNARY_FN(sinh, NEURON_UNARY_SINH)
UNARY_FN(cosh, NEURON_UNARY_COSH)
UNARY_FN(asinh, NEURON_UNARY_ASINH)
UNARY_FN(acosh, NEURON_UNARY_ACOSH)
UNARY_FN(atanh, NEURON_UNARY_ATANH)
UNARY_FN(log1p, NEURON_UNARY_LOG1P)
UNARY_FN(expm1, NEURON_UNARY_EXPM1)
UNARY_FN(log2, NEURON_UNARY_LOG2)
UNARY_FN(log10, NEURON_UNARY_LOG10)
UNARY_FN(exp2, NEURON_UNARY_EXP2)
UNARY_FN(erfc, NEURON_UNARY_ERFC)
UNARY_FN(erfinv, NEURON_UNARY_ERFINV)
UNARY_FN(lgamma, NEURON_UNARY_LGAMMA)
UNARY_FN(digamma, NEURON_UNARY_DIGAMMA)
UNARY_FN(i0, NEURON_UNARY_I0)
UNARY_FN(sinc, NEURON_UNARY_SINC)
// torch.special
UNARY_FN(special_bessel_j0, NEURON_UNARY_BESSEL_J0)
UNARY_FN(special_bessel_j1, NEURON_UNARY_BESSEL_J1)
UNARY_FN(special_bessel_y0, NEURON_UNARY_BESSEL_Y0)
UNARY_FN(special_bessel_y1, NEURON_UNARY_BESSEL_Y1)
UNARY_FN(special_modified_bessel_i0, NEURON_UNARY_I0)
UNARY_FN(special_modified_bessel_i1, NEURON_UNARY_MODIFIED_BESSEL_I1)
UNARY_FN(special_modified_bessel_k0, NEURON_UNARY_MODIFIED_BESSEL_K0)
UNARY_FN(special_modified_bessel_k1, NEURON_UNARY_MODIFIED_BESSEL_K1)
UNARY_FN(special_scaled_modified_bessel_k0, NEURON_UNARY_SCALED_MODIFIED_BESSEL_K0)
UNARY_FN(special_scaled_modified_bessel_k1, NEURON_UNARY_SCALED_MODIFIED_BESSEL_K1)
UNARY_FN(special_spherical_bessel_j0, NEURON_UNARY_SPHERICAL_BESSEL_J0)
UNARY_FN(special_airy_ai, NEURON_UNARY_AIRY_AI)
UNARY_FN(special_entr, NEURON_UNARY_ENTR)
UNARY_FN(special_erfcx, NEURON_UNARY_ERFCX)
UNARY_FN(special_i0e, NEURON_UNARY_I0E)
UNARY_FN(special_i1, NEURON_UNARY_MODIFIED_BESSEL_I1)
UNARY_FN(special_i1e, NEURON_UNARY_I1E)
UNARY_FN(special_log_ndtr, NEURON_UNARY_LOG_NDTR)
UNARY_FN(special_ndtri, NEURON_UNARY_NDTRI)

Tensor &polygamma_o(int64_t n, const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("polygamma");
	TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
	if (n > 1000000) {
		note_fallback("polygamma");
		return assign_out(out, at::polygamma(n, self.cpu()));
	}
	return unary_into("polygamma", NEURON_UNARY_POLYGAMMA, out, self,
			  [&](const Tensor &x) { return at::polygamma(n, x); }, {static_cast<double>(n)});
}
Tensor polygamma_f(int64_t n, const Tensor &self)
{
	Tensor out = float_out_like(self);
	return polygamma_o(n, self, out);
}
Tensor &polygamma_i(Tensor &self, int64_t n) { return polygamma_o(n, self, self); }

// Rounding keeps integer tensors as they are (a copy), as PyTorch does.
#define ROUNDING_FN(name, FN)                                                                                       \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                           \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		if (!at::isFloatingType(self.scalar_type()) && chip_ok(self) && chip_ok(out)) {                     \
			if (!out.is_same(self))                                                                     \
				assign_out(out, self);                                                              \
			return out;                                                                                 \
		}                                                                                                   \
		return unary_into(#name, FN, out, self, [](const Tensor &x) { return at::name(x); });              \
	}                                                                                                           \
	Tensor name##_f(const Tensor &self)                                                                         \
	{                                                                                                           \
		Tensor out = at::empty_like(self);                                                                  \
		return name##_o(self, out);                                                                         \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self) { return name##_o(self, self); }

ROUNDING_FN(floor, NEURON_UNARY_FLOOR)
ROUNDING_FN(ceil, NEURON_UNARY_CEIL)
ROUNDING_FN(round, NEURON_UNARY_ROUND)
ROUNDING_FN(trunc, NEURON_UNARY_TRUNC)
ROUNDING_FN(frac, NEURON_UNARY_FRAC)

Tensor &round_dec_o(const Tensor &self, int64_t decimals, Tensor &out)
{
	NEURON_NATIVE("round");
	if (decimals == 0)
		return round_o(self, out);
	const double ten = std::pow(10.0, static_cast<double>(std::llabs(decimals)));
	MathArgs a{ten, 0, 0, decimals < 0 ? 1 : 0};
	if (!std::isfinite(ten)) // |decimals| > 308: PyTorch's own arithmetic overflows too
		a = MathArgs{};
	return unary_into("round.decimals", std::isfinite(ten) ? NEURON_UNARY_ROUND_DECIMALS : NEURON_UNARY_ROUND, out,
			  self, [&](const Tensor &x) { return at::round(x, decimals); }, a);
}
Tensor round_dec_f(const Tensor &self, int64_t decimals)
{
	Tensor out = at::empty_like(self);
	return round_dec_o(self, decimals, out);
}
Tensor &round_dec_i(Tensor &self, int64_t decimals) { return round_dec_o(self, decimals, self); }

// sign: floats on the chip; integers and bool as sgn (ops_math.cpp).
Tensor &sign_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("sign");
	if (!at::isFloatingType(self.scalar_type()))
		return at::sgn_out(out, self);
	return unary_into("sign", NEURON_UNARY_SIGN, out, self, [](const Tensor &x) { return at::sign(x); });
}
Tensor sign_f(const Tensor &self)
{
	Tensor out = at::empty_like(self);
	return sign_o(self, out);
}
Tensor &sign_i(Tensor &self) { return sign_o(self, self); }

// ---- parametrised activations ----

Tensor &leaky_relu_o(const Tensor &self, const Scalar &slope, Tensor &out)
{
	NEURON_NATIVE("leaky_relu");
	return unary_into("leaky_relu", NEURON_UNARY_LEAKY_RELU, out, self,
			  [&](const Tensor &x) { return at::leaky_relu(x, slope); }, {slope.toDouble()});
}
Tensor leaky_relu_f(const Tensor &self, const Scalar &slope)
{
	Tensor out = at::empty_like(self);
	return leaky_relu_o(self, slope, out);
}
Tensor &leaky_relu_i(Tensor &self, const Scalar &slope) { return leaky_relu_o(self, slope, self); }

Tensor &softplus_o(const Tensor &self, const Scalar &beta, const Scalar &threshold, Tensor &out)
{
	NEURON_NATIVE("softplus");
	return unary_into("softplus", NEURON_UNARY_SOFTPLUS, out, self,
			  [&](const Tensor &x) { return at::softplus(x, beta, threshold); },
			  {beta.toDouble(), threshold.toDouble()});
}
Tensor softplus_f(const Tensor &self, const Scalar &beta, const Scalar &threshold)
{
	Tensor out = at::empty_like(self);
	return softplus_o(self, beta, threshold, out);
}

Tensor &elu_o(const Tensor &self, const Scalar &alpha, const Scalar &scale, const Scalar &input_scale, Tensor &out)
{
	NEURON_NATIVE("elu");
	return unary_into("elu", NEURON_UNARY_ELU, out, self,
			  [&](const Tensor &x) { return at::elu(x, alpha, scale, input_scale); },
			  {alpha.toDouble(), scale.toDouble(), input_scale.toDouble()});
}
Tensor elu_f(const Tensor &self, const Scalar &alpha, const Scalar &scale, const Scalar &input_scale)
{
	Tensor out = at::empty_like(self);
	return elu_o(self, alpha, scale, input_scale, out);
}
Tensor &elu_i(Tensor &self, const Scalar &alpha, const Scalar &scale, const Scalar &input_scale)
{
	return elu_o(self, alpha, scale, input_scale, self);
}

#define ACTIVATION_FN(name, FN)                                                                                     \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                           \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_into(#name, FN, out, self, [](const Tensor &x) { return at::name(x); });              \
	}                                                                                                           \
	Tensor name##_f(const Tensor &self)                                                                         \
	{                                                                                                           \
		Tensor out = at::empty_like(self);                                                                  \
		return name##_o(self, out);                                                                         \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self) { return name##_o(self, self); }

ACTIVATION_FN(hardsigmoid, NEURON_UNARY_HARDSIGMOID)
ACTIVATION_FN(hardswish, NEURON_UNARY_HARDSWISH)
ACTIVATION_FN(mish, NEURON_UNARY_MISH)

Tensor &logit_o(const Tensor &self, std::optional<double> eps, Tensor &out)
{
	NEURON_NATIVE("logit");
	MathArgs a;
	if (eps && *eps >= 0)
		a = {*eps, 0, 0, 1};
	return unary_into("logit", NEURON_UNARY_LOGIT, out, self, [&](const Tensor &x) { return at::logit(x, eps); }, a);
}
Tensor logit_f(const Tensor &self, std::optional<double> eps)
{
	Tensor out = float_out_like(self);
	return logit_o(self, eps, out);
}
Tensor &logit_i(Tensor &self, std::optional<double> eps) { return logit_o(self, eps, self); }

Tensor &hardtanh_o(const Tensor &self, const Scalar &lo, const Scalar &hi, Tensor &out)
{
	NEURON_NATIVE("hardtanh");
	return unary_into("hardtanh", NEURON_UNARY_CLAMP, out, self,
			  [&](const Tensor &x) { return at::hardtanh(x, lo, hi); }, {lo.toDouble(), hi.toDouble(), 0, 3});
}
Tensor hardtanh_f(const Tensor &self, const Scalar &lo, const Scalar &hi)
{
	Tensor out = at::empty_like(self);
	return hardtanh_o(self, lo, hi, out);
}
Tensor &hardtanh_i(Tensor &self, const Scalar &lo, const Scalar &hi) { return hardtanh_o(self, lo, hi, self); }

// ---- binary functions ----

// out = fn(a, b) on the chip (a or b may be a host 0-d tensor: it is filled on the
// device), or on the CPU.
template <class CpuFn>
Tensor &binary_into(const char *name, int fn, Tensor &out, const Tensor &a, const Tensor &b, CpuFn cpu, MathArgs m = {})
{
	const auto shape = at::infer_size(a.sizes(), b.sizes());
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	auto operand = [&](const Tensor &t) -> std::optional<Tensor> {
		if (t.device().is_privateuseone())
			return chip_ok(t) ? std::optional<Tensor>(t) : std::nullopt;
		if (!is_host_scalar(t))
			return std::nullopt;
		Tensor d = at::empty({}, out.options().dtype(t.scalar_type() == c10::kDouble ? c10::kFloat : t.scalar_type()));
		if (!chip_ok(d))
			return std::nullopt;
		fill_cmd(d, t.item());
		return d;
	};
	std::optional<Tensor> da, db;
	const bool integer_ok = (fn == NEURON_BINARY_FMOD || fn == NEURON_BINARY_REMAINDER || fn == NEURON_BINARY_FLOOR_DIVIDE) &&
				chip_ok(out) && out.scalar_type() != c10::kBool;
	if (float_dev(out) || integer_ok)
		da = operand(a), db = operand(b);
	if (!da || !db) {
		note_fallback(name);
		out.copy_(cpu(a.cpu(), b.cpu()));
		return out;
	}
	bmath_cmd(out, *da, *db, fn, m.i1, m.f0, m.f1, m.f2);
	return out;
}

Tensor float_result(const Tensor &a, const Tensor &b)
{
	c10::ScalarType dt = at::result_type(a, b);
	if (!at::isFloatingType(dt))
		dt = c10::typeMetaToScalarType(c10::get_default_dtype());
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	return at::empty(at::infer_size(a.sizes(), b.sizes()), dev.options().dtype(dt));
}

Tensor same_result(const Tensor &a, const Tensor &b)
{
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	return at::empty(at::infer_size(a.sizes(), b.sizes()), dev.options().dtype(at::result_type(a, b)));
}

Tensor host_scalar(const Scalar &s) { return at::scalar_tensor(s, at::TensorOptions().dtype(s.type())); }

#define BINARY_FN(name, FN, RESULT)                                                                                  \
	Tensor &name##_o(const Tensor &a, const Tensor &b, Tensor &out)                                             \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return binary_into(#name, FN, out, a, b, [](const Tensor &x, const Tensor &y) { return at::name(x, y); }); \
	}                                                                                                           \
	Tensor name##_f(const Tensor &a, const Tensor &b)                                                           \
	{                                                                                                           \
		Tensor out = RESULT(a, b);                                                                          \
		return name##_o(a, b, out);                                                                         \
	}                                                                                                           \
	Tensor &name##_i(Tensor &a, const Tensor &b) { return name##_o(a, b, a); }

BINARY_FN(atan2, NEURON_BINARY_ATAN2, float_result)
BINARY_FN(hypot, NEURON_BINARY_HYPOT, same_result)
BINARY_FN(copysign, NEURON_BINARY_COPYSIGN, float_result)
BINARY_FN(logaddexp, NEURON_BINARY_LOGADDEXP, same_result)
BINARY_FN(logaddexp2, NEURON_BINARY_LOGADDEXP2, same_result)
BINARY_FN(xlogy, NEURON_BINARY_XLOGY, float_result)
BINARY_FN(nextafter, NEURON_BINARY_NEXTAFTER, same_result)
BINARY_FN(fmod, NEURON_BINARY_FMOD, same_result)
BINARY_FN(remainder, NEURON_BINARY_REMAINDER, same_result)
BINARY_FN(floor_divide, NEURON_BINARY_FLOOR_DIVIDE, same_result)
BINARY_FN(igamma, NEURON_BINARY_IGAMMA, float_result)
BINARY_FN(igammac, NEURON_BINARY_IGAMMAC, float_result)
BINARY_FN(special_xlog1py, NEURON_BINARY_XLOG1PY, float_result)
BINARY_FN(special_zeta, NEURON_BINARY_ZETA, float_result)
BINARY_FN(special_chebyshev_polynomial_t, NEURON_BINARY_CHEBYSHEV_T, float_result)
BINARY_FN(special_chebyshev_polynomial_u, NEURON_BINARY_CHEBYSHEV_U, float_result)
BINARY_FN(special_chebyshev_polynomial_v, NEURON_BINARY_CHEBYSHEV_V, float_result)
BINARY_FN(special_chebyshev_polynomial_w, NEURON_BINARY_CHEBYSHEV_W, float_result)
BINARY_FN(special_shifted_chebyshev_polynomial_t, NEURON_BINARY_SHIFTED_CHEBYSHEV_T, float_result)
BINARY_FN(special_shifted_chebyshev_polynomial_u, NEURON_BINARY_SHIFTED_CHEBYSHEV_U, float_result)
BINARY_FN(special_shifted_chebyshev_polynomial_v, NEURON_BINARY_SHIFTED_CHEBYSHEV_V, float_result)
BINARY_FN(special_shifted_chebyshev_polynomial_w, NEURON_BINARY_SHIFTED_CHEBYSHEV_W, float_result)
BINARY_FN(special_hermite_polynomial_h, NEURON_BINARY_HERMITE_H, float_result)
BINARY_FN(special_hermite_polynomial_he, NEURON_BINARY_HERMITE_HE, float_result)
BINARY_FN(special_laguerre_polynomial_l, NEURON_BINARY_LAGUERRE_L, float_result)
BINARY_FN(special_legendre_polynomial_p, NEURON_BINARY_LEGENDRE_P, float_result)

Tensor fmod_s(const Tensor &a, const Scalar &b) { return fmod_f(a, host_scalar(b)); }
Tensor &fmod_si(Tensor &a, const Scalar &b) { return fmod_i(a, host_scalar(b)); }
Tensor &fmod_so(const Tensor &a, const Scalar &b, Tensor &out) { return fmod_o(a, host_scalar(b), out); }
Tensor remainder_s(const Tensor &a, const Scalar &b) { return remainder_f(a, host_scalar(b)); }
Tensor &remainder_si(Tensor &a, const Scalar &b) { return remainder_i(a, host_scalar(b)); }
Tensor &remainder_so(const Tensor &a, const Scalar &b, Tensor &out) { return remainder_o(a, host_scalar(b), out); }
Tensor remainder_st(const Scalar &a, const Tensor &b) { return remainder_f(host_scalar(a), b); }
Tensor copysign_s(const Tensor &a, const Scalar &b) { return copysign_f(a, host_scalar(b)); }
Tensor xlogy_ss(const Scalar &a, const Tensor &b) { return xlogy_f(host_scalar(a), b); }
Tensor xlogy_os(const Tensor &a, const Scalar &b) { return xlogy_f(a, host_scalar(b)); }
Tensor floor_divide_s(const Tensor &a, const Scalar &b) { return floor_divide_f(a, host_scalar(b)); }

// div with rounding_mode: "trunc" = trunc(a / b), "floor" = floor division (floats).
Tensor &div_mode_o(const Tensor &a, const Tensor &b, std::optional<c10::string_view> mode, Tensor &out)
{
	NEURON_NATIVE("div");
	if (!mode)
		return at::div_out(out, a, b);
	if (*mode == "floor")
		return floor_divide_o(a, b, out);
	TORCH_CHECK(*mode == "trunc", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
		    std::string(*mode), "'");
	if (!at::isFloatingType(out.scalar_type())) {
		note_fallback("div.Tensor_mode");
		return assign_out(out, at::div(a.cpu(), b.cpu(), *mode));
	}
	at::div_out(out, a, b);
	return trunc_o(out, out);
}
Tensor div_mode_f(const Tensor &a, const Tensor &b, std::optional<c10::string_view> mode)
{
	Tensor out = mode ? same_result(a, b) : float_result(a, b);
	return div_mode_o(a, b, mode, out);
}
Tensor &div_mode_i(Tensor &a, const Tensor &b, std::optional<c10::string_view> mode) { return div_mode_o(a, b, mode, a); }
Tensor div_mode_s(const Tensor &a, const Scalar &b, std::optional<c10::string_view> mode)
{
	return div_mode_f(a, host_scalar(b), mode);
}

// ---- activation backwards: grad and the forward input, one BINARY_MATH each ----

Tensor act_backward(const char *name, int fn, const Tensor &g, const Tensor &x, MathArgs m,
		    const std::function<Tensor(const Tensor &, const Tensor &)> &cpu)
{
	Tensor out = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	return binary_into(name, fn, out, g, x, cpu, m);
}

Tensor leaky_relu_backward(const Tensor &g, const Tensor &x, const Scalar &slope, bool self_is_result)
{
	NEURON_NATIVE("leaky_relu_backward");
	TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
		    "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported.");
	return act_backward("leaky_relu_backward", NEURON_BINARY_LEAKY_RELU_BACKWARD, g, x, {slope.toDouble()},
			    [&](const Tensor &a, const Tensor &b) { return at::leaky_relu_backward(a, b, slope, self_is_result); });
}
Tensor softplus_backward(const Tensor &g, const Tensor &x, const Scalar &beta, const Scalar &threshold)
{
	NEURON_NATIVE("softplus_backward");
	return act_backward("softplus_backward", NEURON_BINARY_SOFTPLUS_BACKWARD, g, x,
			    {beta.toDouble(), threshold.toDouble()},
			    [&](const Tensor &a, const Tensor &b) { return at::softplus_backward(a, b, beta, threshold); });
}
Tensor elu_backward(const Tensor &g, const Scalar &alpha, const Scalar &scale, const Scalar &input_scale, bool is_result,
		    const Tensor &x)
{
	NEURON_NATIVE("elu_backward");
	return act_backward("elu_backward", NEURON_BINARY_ELU_BACKWARD, g, x,
			    {alpha.toDouble(), scale.toDouble(), input_scale.toDouble(), is_result ? 1 : 0},
			    [&](const Tensor &a, const Tensor &b) {
				    return at::elu_backward(a, alpha, scale, input_scale, is_result, b);
			    });
}
Tensor hardtanh_backward(const Tensor &g, const Tensor &x, const Scalar &lo, const Scalar &hi)
{
	NEURON_NATIVE("hardtanh_backward");
	return act_backward("hardtanh_backward", NEURON_BINARY_HARDTANH_BACKWARD, g, x, {lo.toDouble(), hi.toDouble()},
			    [&](const Tensor &a, const Tensor &b) { return at::hardtanh_backward(a, b, lo, hi); });
}
Tensor hardsigmoid_backward(const Tensor &g, const Tensor &x)
{
	NEURON_NATIVE("hardsigmoid_backward");
	return act_backward("hardsigmoid_backward", NEURON_BINARY_HARDSIGMOID_BACKWARD, g, x, {},
			    [](const Tensor &a, const Tensor &b) { return at::hardsigmoid_backward(a, b); });
}
Tensor hardswish_backward(const Tensor &g, const Tensor &x)
{
	NEURON_NATIVE("hardswish_backward");
	return act_backward("hardswish_backward", NEURON_BINARY_HARDSWISH_BACKWARD, g, x, {},
			    [](const Tensor &a, const Tensor &b) { return at::hardswish_backward(a, b); });
}
Tensor mish_backward(const Tensor &g, const Tensor &x)
{
	NEURON_NATIVE("mish_backward");
	return act_backward("mish_backward", NEURON_BINARY_MISH_BACKWARD, g, x, {},
			    [](const Tensor &a, const Tensor &b) { return at::mish_backward(a, b); });
}
Tensor logit_backward(const Tensor &g, const Tensor &x, std::optional<double> eps)
{
	NEURON_NATIVE("logit_backward");
	MathArgs m;
	if (eps && *eps >= 0)
		m = {*eps, 0, 0, 1};
	return act_backward("logit_backward", NEURON_BINARY_LOGIT_BACKWARD, g, x, m,
			    [&](const Tensor &a, const Tensor &b) { return at::logit_backward(a, b, eps); });
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REG3(name) m.impl(#name, &name##_f); m.impl(#name "_", &name##_i); m.impl(#name ".out", &name##_o);
#define REG_BIN(name) REG3(name)
	REG3(sin) REG3(cos) REG3(tan) REG3(asin) REG3(acos) REG3(atan) REG3(sinh) REG3(cosh) REG3(asinh) REG3(acosh)
	REG3(atanh) REG3(log1p) REG3(expm1) REG3(log2) REG3(log10) REG3(exp2) REG3(erfc) REG3(erfinv) REG3(lgamma)
	REG3(digamma) REG3(i0) REG3(sinc) REG3(floor) REG3(ceil) REG3(round) REG3(trunc) REG3(frac) REG3(sign)
	REG3(hardsigmoid) REG3(hardswish) REG3(mish) REG3(logit) REG3(leaky_relu) REG3(elu) REG3(hardtanh)
#define REG2(name) m.impl(#name, &name##_f); m.impl(#name ".out", &name##_o);
	REG2(special_bessel_j0) REG2(special_bessel_j1) REG2(special_bessel_y0) REG2(special_bessel_y1)
	REG2(special_modified_bessel_i0) REG2(special_modified_bessel_i1) REG2(special_modified_bessel_k0)
	REG2(special_modified_bessel_k1) REG2(special_scaled_modified_bessel_k0) REG2(special_scaled_modified_bessel_k1)
	REG2(special_spherical_bessel_j0) REG2(special_airy_ai) REG2(special_entr) REG2(special_erfcx) REG2(special_i0e)
	REG2(special_i1) REG2(special_i1e) REG2(special_log_ndtr) REG2(special_ndtri)
	REG2(special_xlog1py) REG2(special_zeta) REG2(special_chebyshev_polynomial_t) REG2(special_chebyshev_polynomial_u)
	REG2(special_chebyshev_polynomial_v) REG2(special_chebyshev_polynomial_w)
	REG2(special_shifted_chebyshev_polynomial_t) REG2(special_shifted_chebyshev_polynomial_u)
	REG2(special_shifted_chebyshev_polynomial_v) REG2(special_shifted_chebyshev_polynomial_w)
	REG2(special_hermite_polynomial_h) REG2(special_hermite_polynomial_he) REG2(special_laguerre_polynomial_l)
	REG2(special_legendre_polynomial_p)
	REG_BIN(igamma) REG_BIN(igammac)
	m.impl("polygamma", &polygamma_f);
	m.impl("polygamma.out", &polygamma_o);
	m.impl("polygamma_", &polygamma_i);
	m.impl("round.decimals", &round_dec_f);
	m.impl("round_.decimals", &round_dec_i);
	m.impl("round.decimals_out", &round_dec_o);
	m.impl("softplus", &softplus_f);
	m.impl("softplus.out", &softplus_o);
	REG_BIN(atan2) REG_BIN(hypot) REG_BIN(logaddexp) REG_BIN(logaddexp2) REG_BIN(nextafter)
	m.impl("copysign.Tensor", &copysign_f);
	m.impl("copysign_.Tensor", &copysign_i);
	m.impl("copysign.out", &copysign_o);
	m.impl("copysign.Scalar", &copysign_s);
	m.impl("xlogy.Tensor", &xlogy_f);
	m.impl("xlogy_.Tensor", &xlogy_i);
	m.impl("xlogy.OutTensor", &xlogy_o);
	m.impl("xlogy.Scalar_Self", &xlogy_ss);
	m.impl("xlogy.Scalar_Other", &xlogy_os);
	m.impl("fmod.Tensor", &fmod_f);
	m.impl("fmod_.Tensor", &fmod_i);
	m.impl("fmod.Tensor_out", &fmod_o);
	m.impl("fmod.Scalar", &fmod_s);
	m.impl("fmod_.Scalar", &fmod_si);
	m.impl("fmod.Scalar_out", &fmod_so);
	m.impl("remainder.Tensor", &remainder_f);
	m.impl("remainder_.Tensor", &remainder_i);
	m.impl("remainder.Tensor_out", &remainder_o);
	m.impl("remainder.Scalar", &remainder_s);
	m.impl("remainder_.Scalar", &remainder_si);
	m.impl("remainder.Scalar_out", &remainder_so);
	m.impl("remainder.Scalar_Tensor", &remainder_st);
	m.impl("floor_divide", &floor_divide_f);
	m.impl("floor_divide_.Tensor", &floor_divide_i);
	m.impl("floor_divide.out", &floor_divide_o);
	m.impl("floor_divide.Scalar", &floor_divide_s);
	m.impl("div.Tensor_mode", &div_mode_f);
	m.impl("div_.Tensor_mode", &div_mode_i);
	m.impl("div.out_mode", &div_mode_o);
	m.impl("div.Scalar_mode", &div_mode_s);
	m.impl("leaky_relu_backward", &leaky_relu_backward);
	m.impl("softplus_backward", &softplus_backward);
	m.impl("elu_backward", &elu_backward);
	m.impl("hardtanh_backward", &hardtanh_backward);
	m.impl("hardsigmoid_backward", &hardsigmoid_backward);
	m.impl("hardswish_backward", &hardswish_backward);
	m.impl("mish_backward", &mish_backward);
	m.impl("logit_backward", &logit_backward);
}

} // namespace torch_neuron
