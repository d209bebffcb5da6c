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
	Tensor sq = at::empty(x.sizes(), mean.options());
	pointwise_cmd(sq, {x, mean}, {{NEURON_PW_SUB, pw_in(0), pw_in(1)}, {NEURON_PW_MUL, pw_step(0), pw_step(0)}});
	Tensor rstd = at::empty(ks, mean.options());
	reduce_cmd(NEURON_OP_MEAN, rstd, sq, mask);
	PwChain(rstd).then_const(NEURON_PW_ADD, 0).apply(NEURON_PW_RSQRT).run(rstd, {eps});
	// out = (x - mean) * rstd [* weight] [+ bias], one pass.
	Tensor out = at::empty(x.sizes(), x.options());
	PwChain chain(x);
	chain.then(NEURON_PW_SUB, mean).then(NEURON_PW_MUL, rstd);
	if (weight && weight->defined())
		chain.then(NEURON_PW_MUL, *weight);
	if (bias && bias->defined())
		chain.then(NEURON_PW_ADD, *bias);
	chain.run(out);
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
	// Each POINTWISE below is the chain of elementwise commands it replaces (the
	// same bits in f32), a third fewer commands per layer norm.
	Tensor xhat = at::empty(x.sizes(), opts);
	PwChain(x).then(NEURON_PW_SUB, mean).then(NEURON_PW_MUL, rstd).run(xhat);
	Tensor dx, dw, db;
	if (mask3[0]) {
		// dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd, g = go * weight.
		Tensor g = go;
		if (weight && weight->defined()) {
			g = at::empty(x.sizes(), opts);
			binary_op(NEURON_OP_MUL, g, go, *weight);
		}
		Tensor m1 = at::empty(ks, opts), m2 = at::empty(ks, opts), t = at::empty(x.sizes(), opts);
		reduce_cmd(NEURON_OP_MEAN, m1, g, inner);
		binary_op(NEURON_OP_MUL, t, g, xhat);
		reduce_cmd(NEURON_OP_MEAN, m2, t, inner);
		dx = at::empty(x.sizes(), opts);
		pointwise_cmd(dx, {g, m1, xhat, m2, rstd},
			      {{NEURON_PW_SUB, pw_in(0), pw_in(1)},
			       {NEURON_PW_MUL, pw_in(2), pw_in(3)},
			       {NEURON_PW_SUB, pw_step(0), pw_step(1)},
			       {NEURON_PW_MUL, pw_step(2), pw_in(4)}});
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
