// Elementwise ops and activations composed of native ops: glu, log-sigmoid,
// hard/soft shrink, threshold, prelu (+ their backwards), heaviside, fmax/fmin,
// signbit, nan_to_num, angle of real tensors, lerp with a tensor weight, clamp
// with tensor bounds. Formulas as PyTorch's CPU kernels define them.
#include "compose.h"

#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>

namespace torch_neuron {

namespace {

Tensor glu_f_dev(const Tensor &x, int64_t dim)
{
	NEURON_NATIVE("glu");
	if (!floats_on_device({&x}))
		return note_fallback("glu"), to_dev(at::glu(x.cpu(), dim), x);
	const int64_t d = c10::maybe_wrap_dim(dim, x.dim());
	TORCH_CHECK(x.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", x.size(d));
	const auto halves = x.chunk(2, d);
	return halves[0] * at::sigmoid(halves[1]);
}
Tensor &glu_o(const Tensor &x, int64_t dim, Tensor &out) { return assign_out(out, glu_f_dev(x, dim)); }
Tensor glu_backward_dev(const Tensor &g, const Tensor &x, int64_t dim)
{
	NEURON_NATIVE("glu_backward");
	if (!floats_on_device({&g, &x}))
		return note_fallback("glu_backward"), to_dev(at::glu_backward(g.cpu(), x.cpu(), dim), x);
	const int64_t d = c10::maybe_wrap_dim(dim, x.dim());
	const auto halves = x.chunk(2, d);
	const Tensor s = at::sigmoid(halves[1]);
	return at::cat({g * s, g * halves[0] * s * (1 - s)}, d);
}
Tensor &glu_backward_o(const Tensor &g, const Tensor &x, int64_t dim, Tensor &out)
{
	return assign_out(out, glu_backward_dev(g, x, dim));
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); the buffer PyTorch's CPU kernel
// keeps for its backward is not needed here (empty).
std::tuple<Tensor, Tensor> log_sigmoid_forward_dev(const Tensor &x)
{
	NEURON_NATIVE("log_sigmoid_forward");
	if (!floats_on_device({&x})) {
		note_fallback("log_sigmoid_forward");
		auto [o, b] = at::log_sigmoid_forward(x.cpu());
		return {to_dev(o, x), to_dev(b, x)};
	}
	return {at::clamp_max(x, 0) - at::log1p(at::exp(-at::abs(x))), at::empty({0}, x.options())};
}
Tensor log_sigmoid_backward_dev(const Tensor &g, const Tensor &x, const Tensor &buffer)
{
	NEURON_NATIVE("log_sigmoid_backward");
	if (!floats_on_device({&g, &x}))
		return note_fallback("log_sigmoid_backward"), to_dev(at::log_sigmoid_backward(g.cpu(), x.cpu(), buffer.cpu()), x);
	return g * at::sigmoid(-x);
}

Tensor hardshrink_dev(const Tensor &x, const Scalar &l)
{
	NEURON_NATIVE("hardshrink");
	if (!floats_on_device({&x}))
		return note_fallback("hardshrink"), to_dev(at::hardshrink(x.cpu(), l), x);
	return at::where(at::logical_or(x > l, x < -l.toDouble()), x, at::zeros_like(x));
}
Tensor hardshrink_backward_dev(const Tensor &g, const Tensor &x, const Scalar &l)
{
	NEURON_NATIVE("hardshrink_backward");
	if (!floats_on_device({&g, &x}))
		return note_fallback("hardshrink_backward"), to_dev(at::hardshrink_backward(g.cpu(), x.cpu(), l), x);
	return at::where(at::logical_or(x > l, x < -l.toDouble()), g, at::zeros_like(g));
}
Tensor softshrink_dev(const Tensor &x, const Scalar &l)
{
	NEURON_NATIVE("softshrink");
	TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
	if (!floats_on_device({&x}))
		return note_fallback("softshrink"), to_dev(at::softshrink(x.cpu(), l), x);
	const double lam = l.toDouble();
	return at::where(x > lam, x - lam, at::where(x < -lam, x + lam, at::zeros_like(x)));
}
Tensor softshrink_backward_dev(const Tensor &g, const Tensor &x, const Scalar &l)
{
	NEURON_NATIVE("softshrink_backward");
	if (!floats_on_device({&g, &x}))
		return note_fallback("softshrink_backward"), to_dev(at::softshrink_backward(g.cpu(), x.cpu(), l), x);
	return at::where(at::logical_or(x > l, x < -l.toDouble()), g, at::zeros_like(g));
}
Tensor &hardshrink_o(const Tensor &x, const Scalar &l, Tensor &out) { return assign_out(out, hardshrink_dev(x, l)); }
Tensor &softshrink_o(const Tensor &x, const Scalar &l, Tensor &out) { return assign_out(out, softshrink_dev(x, l)); }

Tensor threshold_f(const Tensor &x, const Scalar &th, const Scalar &value)
{
	NEURON_NATIVE("threshold");
	if (!all_on_device({&x}) || x.scalar_type() == c10::kBool)
		return note_fallback("threshold"), to_dev(at::threshold(x.cpu(), th, value), x);
	Tensor v = at::empty({}, x.options());
	fill_cmd(v, value);
	return at::where(x > th, x, v);
}
Tensor &threshold_o(const Tensor &x, const Scalar &th, const Scalar &value, Tensor &out)
{
	return assign_out(out, threshold_f(x, th, value));
}
Tensor &threshold_i(Tensor &x, const Scalar &th, const Scalar &value) { return assign_out(x, threshold_f(x, th, value)); }

// PReLU: the weight broadcasts over dim 1 (one per channel) or is one value.
Tensor prelu_weight(const Tensor &x, const Tensor &w)
{
	if (w.numel() == 1 || x.dim() < 2)
		return w.reshape({});
	std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
	shape[1] = w.numel();
	return w.reshape(shape);
}
Tensor prelu_kernel(const Tensor &x, const Tensor &w)
{
	NEURON_NATIVE("_prelu_kernel");
	if (!floats_on_device({&x, &w}))
		return note_fallback("_prelu_kernel"), to_dev(at::_prelu_kernel(x.cpu(), w.cpu()), x);
	return at::where(x > 0, x, x * w);
}
std::tuple<Tensor, Tensor> prelu_kernel_backward(const Tensor &g, const Tensor &x, const Tensor &w)
{
	NEURON_NATIVE("_prelu_kernel_backward");
	if (!floats_on_device({&g, &x, &w})) {
		note_fallback("_prelu_kernel_backward");
		auto [a, b] = at::_prelu_kernel_backward(g.cpu(), x.cpu(), w.cpu());
		return {to_dev(a, x), to_dev(b, x)};
	}
	const Tensor pos = x > 0;
	const Tensor gx = at::where(pos, g, g * w);
	const Tensor gw = at::where(pos, at::zeros_like(g), g * x);
	return {gx, at::sum_to(gw, w.sizes())};
}

Tensor heaviside_dev(const Tensor &x, const Tensor &values)
{
	NEURON_NATIVE("heaviside");
	if (!all_on_device({&x, &values}) || x.scalar_type() == c10::kBool)
		return note_fallback("heaviside"), to_dev(at::heaviside(x.cpu(), values.cpu()), x);
	const auto dt = at::result_type(x, values);
	return at::where(x == 0, values.to(dt), (x > 0).to(dt));
}
Tensor &heaviside_o(const Tensor &x, const Tensor &v, Tensor &out) { return assign_out(out, heaviside_dev(x, v)); }

// fmax / fmin: the other operand where one is NaN.
Tensor fmaxmin(const char *name, bool mx, const Tensor &a, const Tensor &b)
{
	if (!all_on_device({&a, &b}) || at::result_type(a, b) == c10::kBool) {
		note_fallback(name);
		return to_dev(mx ? at::fmax(a.cpu(), b.cpu()) : at::fmin(a.cpu(), b.cpu()), a);
	}
	const Tensor m = mx ? at::maximum(a, b) : at::minimum(a, b);
	if (!at::isFloatingType(m.scalar_type()))
		return m;
	return at::where(at::isnan(a), b.to(m.scalar_type()), at::where(at::isnan(b), a.to(m.scalar_type()), m));
}
Tensor fmax_dev(const Tensor &a, const Tensor &b) { NEURON_NATIVE("fmax"); return fmaxmin("fmax", true, a, b); }
Tensor fmin_dev(const Tensor &a, const Tensor &b) { NEURON_NATIVE("fmin"); return fmaxmin("fmin", false, a, b); }
Tensor &fmax_o(const Tensor &a, const Tensor &b, Tensor &out) { return assign_out(out, fmax_dev(a, b)); }
Tensor &fmin_o(const Tensor &a, const Tensor &b, Tensor &out) { return assign_out(out, fmin_dev(a, b)); }

// signbit: the sign bit, -0.0 and -nan included (copysign reads it).
Tensor signbit_dev(const Tensor &x)
{
	NEURON_NATIVE("signbit");
	if (!all_on_device({&x}))
		return note_fallback("signbit"), to_dev(at::signbit(x.cpu()), x);
	if (!at::isFloatingType(x.scalar_type()))
		return x < 0;
	return at::copysign(at::ones_like(x), x) < 0;
}
Tensor &signbit_o(const Tensor &x, Tensor &out) { return assign_out(out, signbit_dev(x)); }

Tensor &nan_to_num_o(const Tensor &x, std::optional<double> nan, std::optional<double> posinf,
		     std::optional<double> neginf, Tensor &out)
{
	NEURON_NATIVE("nan_to_num");
	if (!all_on_device({&x}))
		return note_fallback("nan_to_num"), assign_out(out, at::nan_to_num(x.cpu(), nan, posinf, neginf));
	if (!at::isFloatingType(x.scalar_type()))
		return assign_out(out, x.clone());
	double hi = std::numeric_limits<float>::max();
	if (x.scalar_type() == c10::kHalf)
		hi = 65504.0;
	else if (x.scalar_type() == c10::kBFloat16)
		hi = 3.3895313892515355e38;
	Tensor r = at::where(at::isnan(x), nan.value_or(0.0), x);
	r = at::where(at::isposinf(x), posinf.value_or(hi), r);
	r = at::where(at::isneginf(x), neginf.value_or(-hi), r);
	return assign_out(out, r);
}

// The angle of a real number: pi for negatives, 0 otherwise, NaN kept.
Tensor angle_dev(const Tensor &x)
{
	NEURON_NATIVE("angle");
	if (!floats_on_device({&x}))
		return note_fallback("angle"), to_dev(at::angle(x.cpu()), x);
	return at::where(at::isnan(x), x, at::where(x < 0, M_PI, 0.0).to(x.scalar_type()));
}
Tensor &angle_o(const Tensor &x, Tensor &out) { return assign_out(out, angle_dev(x)); }

Tensor &lerp_t_o(const Tensor &a, const Tensor &b, const Tensor &w, Tensor &out)
{
	NEURON_NATIVE("lerp");
	if (!floats_on_device({&a, &b, &w}))
		return note_fallback("lerp"), assign_out(out, at::lerp(a.cpu(), b.cpu(), w.cpu()));
	// As PyTorch: a + w (b - a) for |w| < 0.5, b - (b - a)(1 - w) otherwise.
	const Tensor d = b - a;
	return assign_out(out, at::where(at::abs(w) < 0.5, a + w * d, b - d * (1 - w)));
}
Tensor lerp_t(const Tensor &a, const Tensor &b, const Tensor &w)
{
	Tensor out = at::empty({0}, a.options());
	return lerp_t_o(a, b, w, out);
}
Tensor &lerp_t_i(Tensor &a, const Tensor &b, const Tensor &w) { return assign_out(a, lerp_t(a, b, w)); }
Tensor lerp_s(const Tensor &a, const Tensor &b, const Scalar &w)
{
	Tensor out = at::empty({0}, a.options());
	Tensor wt = at::empty({}, a.options());
	fill_cmd(wt, w);
	return lerp_t_o(a, b, wt, out);
}
Tensor &lerp_s_o(const Tensor &a, const Tensor &b, const Scalar &w, Tensor &out) { return assign_out(out, lerp_s(a, b, w)); }

Tensor &clamp_t_o(const Tensor &x, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi, Tensor &out)
{
	NEURON_NATIVE("clamp");
	const Tensor l = lo ? *lo : Tensor(), h = hi ? *hi : Tensor();
	if (!all_on_device({&x, &l, &h}) || x.scalar_type() == c10::kBool)
		return note_fallback("clamp.Tensor"), assign_out(out, at::clamp(x.cpu(), cpu_opt(lo), cpu_opt(hi)));
	// NaN bounds and inputs propagate, as torch.clamp.
	Tensor r = x;
	if (l.defined())
		r = at::maximum(r, l);
	if (h.defined())
		r = at::minimum(r, h);
	return assign_out(out, r);
}
Tensor clamp_t(const Tensor &x, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi)
{
	Tensor out = at::empty({0}, x.options());
	return clamp_t_o(x, lo, hi, out);
}
Tensor &clamp_t_i(Tensor &x, const std::optional<Tensor> &lo, const std::optional<Tensor> &hi)
{
	return assign_out(x, clamp_t(x, lo, hi));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("glu", &glu_f_dev);
	m.impl("glu.out", &glu_o);
	m.impl("glu_backward", &glu_backward_dev);
	m.impl("glu_backward.grad_input", &glu_backward_o);
	m.impl("log_sigmoid_forward", &log_sigmoid_forward_dev);
	m.impl("log_sigmoid_backward", &log_sigmoid_backward_dev);
	m.impl("hardshrink", &hardshrink_dev);
	m.impl("hardshrink.out", &hardshrink_o);
	m.impl("hardshrink_backward", &hardshrink_backward_dev);
	m.impl("softshrink", &softshrink_dev);
	m.impl("softshrink.out", &softshrink_o);
	m.impl("softshrink_backward", &softshrink_backward_dev);
	m.impl("threshold", &threshold_f);
	m.impl("threshold.out", &threshold_o);
	m.impl("threshold_", &threshold_i);
	m.impl("_prelu_kernel", &prelu_kernel);
	m.impl("_prelu_kernel_backward", &prelu_kernel_backward);
	m.impl("heaviside", &heaviside_dev);
	m.impl("heaviside.out", &heaviside_o);
	m.impl("fmax", &fmax_dev);
	m.impl("fmax.out", &fmax_o);
	m.impl("fmin", &fmin_dev);
	m.impl("fmin.out", &fmin_o);
	m.impl("signbit", &signbit_dev);
	m.impl("signbit.out", &signbit_o);
	m.impl("nan_to_num.out", &nan_to_num_o);
	m.impl("angle", &angle_dev);
	m.impl("angle.out", &angle_o);
	m.impl("lerp.Tensor", &lerp_t);
	m.impl("lerp.Tensor_out", &lerp_t_o);
	m.impl("lerp_.Tensor", &lerp_t_i);
	m.impl("lerp.Scalar", &lerp_s);
	m.impl("lerp.Scalar_out", &lerp_s_o);
	m.impl("clamp.Tensor", &clamp_t);
	m.impl("clamp.Tensor_out", &clamp_t_o);
	m.impl("clamp_.Tensor", &clamp_t_i);
}

} // namespace torch_neuron
