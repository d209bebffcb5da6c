// Layer norm (+ backward) over the last k dims, from reductions and elementwise ops.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <array>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- layer norm (normalized over the last k dims) ----

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor &x_in, c10::IntArrayRef nshape, const std::optional<Tensor> &weight,
					      const std::optional<Tensor> &bias, double eps)
{
	NEURON_NATIVE("native_layer_norm");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x_in.dim();
	if (!float_dev(x_in) || nd == 0 || nd > NEURON_MAX_DIMS) {
		note_fallback("native_layer_norm");
		auto [o, m, r] = at::native_layer_norm(x_in.cpu(), nshape,
						       weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
						       bias && bias->defined() ? std::optional<Tensor>(bias->cpu()) : std::nullopt, eps);
		return {o.to(x_in.device()), m.to(x_in.device()), r.to(x_in.device())};
	}
	const Tensor x = x_in;
	int64_t mask = 0;
	for (int64_t i = nd - k; i < nd; ++i)
		mask |= int64_t{1} << i;
	const auto ks = keep_shape(x, mask);
	Tensor mean = at::empty(ks, x.options().dtype(c10::kFloat));
	reduce_cmd(NEURON_OP_MEAN, mean, x, mask);
	Tensor xc = at::empty(x.sizes(), x.options().dtype(c10::kFloat));
	binary_op(NEURON_OP_SUB, xc, x, mean);
	Tensor sq = at::empty(x.sizes(), xc.options());
	binary_op(NEURON_OP_MUL, sq, xc, xc);
	Tensor rstd = at::empty(ks, mean.options());
	reduce_cmd(NEURON_OP_MEAN, rstd, sq, mask);
	scalar_op(NEURON_OP_ADD_SCALAR, rstd, rstd, eps);
	math_cmd(rstd, rstd, NEURON_UNARY_RSQRT);
	Tensor out = at::empty(x.sizes(), x.options());
	binary_op(NEURON_OP_MUL, out, xc, rstd);
	if (weight && weight->defined())
		binary_op(NEURON_OP_MUL, out, out, *weight);
	if (bias && bias->defined())
		binary_op(NEURON_OP_ADD, out, out, *bias);
	return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor &go, const Tensor &x, c10::IntArrayRef nshape,
						       const Tensor &mean, const Tensor &rstd,
						       const std::optional<Tensor> &weight, const std::optional<Tensor> &bias,
						       std::array<bool, 3> mask3)
{
	NEURON_NATIVE("native_layer_norm_backward");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x.dim();
	if (!float_dev(go) || !float_dev(x) || nd == 0) {
		note_fallback("native_layer_norm_backward");
		auto [a, b, c] = at::native_layer_norm_backward(
			go.cpu(), x.cpu(), nshape, mean.cpu(), rstd.cpu(),
			weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
			bias && bias->defined() ? std::optional<Tensor>(bias->cpu()) : std::nullopt, mask3);
		auto mv = [&](const Tensor &t) { return t.defined() ? t.to(x.device()) : t; };
		return {mv(a), mv(b), mv(c)};
	}
	int64_t inner = 0, outer = 0;
	for (int64_t i = 0; i < nd; ++i)
		(i >= nd - k ? inner : outer) |= int64_t{1} << i;
	const auto ks = keep_shape(x, inner);
	const auto opts = go.options();
	Tensor xhat = at::empty(x.sizes(), opts);
	binary_op(NEURON_OP_SUB, xhat, x, mean);
	binary_op(NEURON_OP_MUL, xhat, xhat, rstd);
	Tensor dx, dw, db;
	if (mask3[0]) {
		Tensor g = at::empty(x.sizes(), opts);
		if (weight && weight->defined())
			binary_op(NEURON_OP_MUL, g, go, *weight);
		else
			copy_cast_into(g, go);
		Tensor m1 = at::empty(ks, opts), m2 = at::empty(ks, opts), t = at::empty(x.sizes(), opts);
		reduce_cmd(NEURON_OP_MEAN, m1, g, inner);
		binary_op(NEURON_OP_MUL, t, g, xhat);
		reduce_cmd(NEURON_OP_MEAN, m2, t, inner);
		binary_op(NEURON_OP_MUL, t, xhat, m2);
		binary_op(NEURON_OP_SUB, g, g, m1);
		binary_op(NEURON_OP_SUB, g, g, t);
		binary_op(NEURON_OP_MUL, g, g, rstd);
		dx = g;
	}
	const std::vector<int64_t> wshape(nshape.begin(), nshape.end());
	if (mask3[1] && weight && weight->defined()) {
		Tensor t = at::empty(x.sizes(), opts);
		binary_op(NEURON_OP_MUL, t, go, xhat);
		dw = at::empty(keep_shape(x, outer), opts);
		reduce_cmd(NEURON_OP_SUM, dw, t, outer);
		dw = dw.view(wshape);
	}
	if (mask3[2] && bias && bias->defined()) {
		db = at::empty(keep_shape(x, outer), opts);
		reduce_cmd(NEURON_OP_SUM, db, go, outer);
		db = db.view(wshape);
	}
	return {dx, dw, db};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("native_layer_norm", &layer_norm);
	m.impl("native_layer_norm_backward", &layer_norm_backward);
}

} // namespace torch_neuron
