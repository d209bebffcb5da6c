// Elementwise math on the chip's UNARY_MATH / BINARY_MATH and the arithmetic ops:
// log, sqrt, rsqrt, erf, reciprocal, sigmoid, abs, pow, clamp, maximum/minimum,
// gelu/threshold backward, sgn, and the optimizers' lerp / addcmul / addcdiv.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// ---- unary math ----

template <class CpuFn>
Tensor &unary_math_into(const char *name, int fn, Tensor &out, const Tensor &self, CpuFn cpu, double p0 = 0,
			double p1 = 0, int64_t flags = 0)
{
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !float_dev(out)) {
		note_fallback(name);
		out.copy_(cpu(self.cpu()));
		return out;
	}
	math_cmd(out, self, fn, p0, p1, flags);
	return out;
}

#define MATH_FAMILY(name, FN, cpuexpr)                                                                              \
	Tensor name##_f(const Tensor &self)                                                                         \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		Tensor out = float_out_like(self);                                                                  \
		return unary_math_into(#name, FN, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self)                                                                              \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_math_into(#name, FN, self, self, [](const Tensor &x) { return cpuexpr; });            \
	}                                                                                                           \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                          \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_math_into(#name, FN, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}

MATH_FAMILY(log, NEURON_UNARY_LOG, at::log(x))
MATH_FAMILY(sqrt, NEURON_UNARY_SQRT, at::sqrt(x))
MATH_FAMILY(rsqrt, NEURON_UNARY_RSQRT, at::rsqrt(x))
MATH_FAMILY(erf, NEURON_UNARY_ERF, at::erf(x))
MATH_FAMILY(reciprocal, NEURON_UNARY_RECIPROCAL, at::reciprocal(x))
MATH_FAMILY(sigmoid, NEURON_UNARY_SIGMOID, at::sigmoid(x))

// abs keeps integer dtypes: those go to the CPU.
Tensor &abs_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("abs");
	return unary_math_into("abs", NEURON_UNARY_ABS, out, self, [](const Tensor &x) { return at::abs(x); });
}
Tensor abs_f(const Tensor &self)
{
	if (self.is_complex()) { // |z| is real: the CPU's kernel, with its real result
		note_fallback("abs");
		return at::abs(self.cpu()).to(self.device());
	}
	Tensor out = at::empty_like(self);
	return abs_o(self, out);
}
Tensor &abs_i(Tensor &self) { return abs_o(self, self); }

Tensor &pow_ts_o(const Tensor &self, const Scalar &e, Tensor &out)
{
	NEURON_NATIVE("pow");
	const double ex = e.toDouble();
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (float_dev(self) && float_dev(out) && ex == 1.0) {
		out.copy_(self);
		return out;
	}
	return unary_math_into("pow", NEURON_UNARY_POW, out, self, [&](const Tensor &x) { return at::pow(x, e); }, ex);
}
Tensor pow_ts(const Tensor &self, const Scalar &e)
{
	Tensor out = at::isFloatingType(self.scalar_type()) ? at::empty_like(self)
							     : at::empty(self.sizes(), self.options().dtype(at::result_type(self, e)));
	return pow_ts_o(self, e, out);
}
Tensor &pow_ts_i(Tensor &self, const Scalar &e) { return pow_ts_o(self, e, self); }

Tensor &clamp_o(const Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi, Tensor &out)
{
	NEURON_NATIVE("clamp");
	if (chip_ok(self) && chip_ok(out) && !at::isFloatingType(out.scalar_type()) && out.scalar_type() != c10::kBool &&
	    !at::isFloatingType(self.scalar_type())) {
		// Integers: BINARY_MATH's maximum / minimum against the bounds (exact in int64).
		Tensor r = self;
		for (int k = 0; k < 2; ++k) {
			const std::optional<Scalar> &bound = k == 0 ? lo : hi;
			if (!bound)
				continue;
			Tensor b = at::empty({}, out.options());
			fill_cmd(b, *bound);
			r = k == 0 ? at::maximum(r, b) : at::minimum(r, b);
		}
		return assign_out(out, r.is_same(self) ? self.clone() : r);
	}
	const int64_t flags = (lo ? 1 : 0) | (hi ? 2 : 0);
	return unary_math_into("clamp", NEURON_UNARY_CLAMP, out, self,
			       [&](const Tensor &x) { return at::clamp(x, lo, hi); }, lo ? lo->toDouble() : 0,
			       hi ? hi->toDouble() : 0, flags);
}
Tensor clamp_f(const Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi)
{
	Tensor out = at::empty_like(self);
	return clamp_o(self, lo, hi, out);
}
Tensor &clamp_i(Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi)
{
	return clamp_o(self, lo, hi, self);
}
Tensor clamp_min_f(const Tensor &self, const Scalar &lo) { return clamp_f(self, lo, std::nullopt); }
Tensor &clamp_min_i(Tensor &self, const Scalar &lo) { return clamp_i(self, lo, std::nullopt); }
Tensor clamp_max_f(const Tensor &self, const Scalar &hi) { return clamp_f(self, std::nullopt, hi); }
Tensor &clamp_max_i(Tensor &self, const Scalar &hi) { return clamp_i(self, std::nullopt, hi); }

// ---- binary math ----

Tensor maxmin(const char *name, int fn, const Tensor &a, const Tensor &b)
{
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), dev_opts(dev, dt));
	if (!chip_ok(out) || dt == c10::kBool || (a.device().is_privateuseone() && !chip_ok(a)) ||
	    (b.device().is_privateuseone() && !chip_ok(b))) {
		note_fallback(name);
		out.copy_(fn == NEURON_BINARY_MAXIMUM ? at::maximum(a.cpu(), b.cpu()) : at::minimum(a.cpu(), b.cpu()));
		return out;
	}
	bmath_cmd(out, on_device(a, out), on_device(b, out), fn);
	return out;
}
Tensor maximum(const Tensor &a, const Tensor &b) { NEURON_NATIVE("maximum"); return maxmin("maximum", NEURON_BINARY_MAXIMUM, a, b); }
Tensor minimum(const Tensor &a, const Tensor &b) { NEURON_NATIVE("minimum"); return maxmin("minimum", NEURON_BINARY_MINIMUM, a, b); }

Tensor pow_tt(const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("pow");
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), dev_opts(dev, dt));
	if (!float_dev(out)) {
		note_fallback("pow");
		out.copy_(at::pow(a.cpu(), b.cpu()));
		return out;
	}
	bmath_cmd(out, on_device(a, out), on_device(b, out), NEURON_BINARY_POW);
	return out;
}

Tensor gelu_backward(const Tensor &g, const Tensor &x, c10::string_view approx)
{
	NEURON_NATIVE("gelu_backward");
	Tensor out = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	if (!float_dev(g) || !float_dev(x)) {
		note_fallback("gelu_backward");
		return at::gelu_backward(g.cpu(), x.cpu(), std::string(approx)).to(g.device());
	}
	bmath_cmd(out, g, x, NEURON_BINARY_GELU_BACKWARD, approx == "tanh" ? 1 : 0);
	return out;
}

Tensor threshold_backward(const Tensor &g, const Tensor &x, const Scalar &thr)
{
	NEURON_NATIVE("threshold_backward");
	Tensor out = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	if (!float_dev(g) || !chip_ok(x)) {
		note_fallback("threshold_backward");
		return at::threshold_backward(g.cpu(), x.cpu(), thr).to(g.device());
	}
	bmath_cmd(out, g, x, NEURON_BINARY_THRESHOLD_BACKWARD, 0, thr.toDouble());
	return out;
}

// ---- optimizer arithmetic ----

// self += w * (end - self)
Tensor &lerp_s_i(Tensor &self, const Tensor &end, const Scalar &w)
{
	NEURON_NATIVE("lerp");
	if (!float_dev(self) || !float_dev(end)) {
		note_fallback("lerp");
		self.copy_(at::lerp(self.cpu(), end.cpu(), w));
		return self;
	}
	Tensor d = at::empty(self.sizes(), self.options());
	binary_op(NEURON_OP_SUB, d, end, self);
	binary_op(NEURON_OP_ADD, self, self, d, w.toDouble());
	return self;
}

Tensor &addc_i(const char *name, int op, Tensor &self, const Tensor &t1, const Tensor &t2, const Scalar &v)
{
	if (!float_dev(self) || !chip_ok(t1) || !chip_ok(t2)) {
		note_fallback(name);
		Tensor r = op == NEURON_OP_MUL ? at::addcmul(self.cpu(), t1.cpu(), t2.cpu(), v)
					       : at::addcdiv(self.cpu(), t1.cpu(), t2.cpu(), v);
		self.copy_(r);
		return self;
	}
	Tensor t = at::empty(at::infer_size(t1.sizes(), t2.sizes()), self.options());
	binary_op(op, t, t1, t2);
	binary_op(NEURON_OP_ADD, self, self, t, v.toDouble());
	return self;
}
Tensor &addcmul_i(Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v) { NEURON_NATIVE("addcmul"); return addc_i("addcmul", NEURON_OP_MUL, self, a, b, v); }
Tensor &addcdiv_i(Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v) { NEURON_NATIVE("addcdiv"); return addc_i("addcdiv", NEURON_OP_DIV, self, a, b, v); }
Tensor addcmul_f(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), at::infer_size(a.sizes(), b.sizes()))).clone();
	return addcmul_i(out, a, b, v);
}
Tensor addcdiv_f(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), at::infer_size(a.sizes(), b.sizes()))).clone();
	return addcdiv_i(out, a, b, v);
}

// sgn(x) = (x > 0) - (x < 0)
Tensor &sgn_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("sgn");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() == c10::kBool) {
		note_fallback("sgn");
		out.copy_(at::sgn(self.cpu()));
		return out;
	}
	Tensor p = at::empty(self.sizes(), self.options().dtype(c10::kBool)), n = at::empty_like(p);
	cmp_scalar_cmd(p, self, NEURON_CMP_GT, 0.0);
	cmp_scalar_cmd(n, self, NEURON_CMP_LT, 0.0);
	binary_op(NEURON_OP_SUB, out, p, n);
	return out;
}
Tensor sgn_f(const Tensor &self) { Tensor o = at::empty_like(self); return sgn_o(self, o); }
Tensor &sgn_i(Tensor &self) { return sgn_o(self, self); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REG3(name, base) m.impl(#name, &base##_f); m.impl(#name "_", &base##_i); m.impl(#name ".out", &base##_o);
	m.impl("sgn", &sgn_f);
	m.impl("sgn_", &sgn_i);
	m.impl("sgn.out", &sgn_o);
	REG3(log, log)
	REG3(sqrt, sqrt)
	REG3(rsqrt, rsqrt)
	REG3(erf, erf)
	REG3(reciprocal, reciprocal)
	REG3(sigmoid, sigmoid)
	REG3(abs, abs)
	m.impl("pow.Tensor_Scalar", &pow_ts);
	m.impl("pow_.Scalar", &pow_ts_i);
	m.impl("pow.Tensor_Scalar_out", &pow_ts_o);
	m.impl("pow.Tensor_Tensor", &pow_tt);
	m.impl("clamp", &clamp_f);
	m.impl("clamp_", &clamp_i);
	m.impl("clamp.out", &clamp_o);
	m.impl("clamp_min", &clamp_min_f);
	m.impl("clamp_min_", &clamp_min_i);
	m.impl("clamp_max", &clamp_max_f);
	m.impl("clamp_max_", &clamp_max_i);
	m.impl("maximum", &maximum);
	m.impl("minimum", &minimum);
	m.impl("gelu_backward", &gelu_backward);
	m.impl("threshold_backward", &threshold_backward);
	m.impl("lerp_.Scalar", &lerp_s_i);
	m.impl("addcmul_", &addcmul_i);
	m.impl("addcdiv_", &addcdiv_i);
	m.impl("addcmul", &addcmul_f);
	m.impl("addcdiv", &addcdiv_f);
}

} // namespace torch_neuron
