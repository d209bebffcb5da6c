// log_softmax (+ backward; the chip's LOG_SOFTMAX) and nll_loss (+ backward; class
// weights, ignore_index, reductions), so cross_entropy is native.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <tuple>

namespace torch_neuron {

namespace {

// ---- log_softmax ----

Tensor log_softmax(const Tensor &self, int64_t dim, bool half_to_float)
{
	NEURON_NATIVE("_log_softmax");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	Tensor out = at::empty(self.sizes(), self.options().dtype(half_to_float ? c10::kFloat : self.scalar_type()));
	if (!float_dev(self)) {
		note_fallback("_log_softmax");
		out.copy_(at::_log_softmax(self.cpu(), dim, half_to_float));
		return out;
	}
	unary_op(NEURON_OP_LOG_SOFTMAX, out, self, d);
	return out;
}

// dx = g - exp(y) * sum(g, dim)
Tensor log_softmax_backward(const Tensor &g, const Tensor &y, int64_t dim, c10::ScalarType input_dtype)
{
	NEURON_NATIVE("_log_softmax_backward_data");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(y.dim(), 1));
	if (!float_dev(g) || !float_dev(y) || y.dim() == 0) {
		note_fallback("_log_softmax_backward_data");
		return at::_log_softmax_backward_data(g.cpu(), y.cpu(), dim, input_dtype).to(g.device());
	}
	std::vector<int64_t> ks(y.sizes().begin(), y.sizes().end());
	ks[d] = 1;
	Tensor s = at::empty(ks, g.options());
	reduce_cmd(NEURON_OP_SUM, s, g, int64_t{1} << d);
	Tensor e = at::empty(y.sizes(), g.options());
	unary_op(NEURON_OP_EXP, e, y);
	binary_op(NEURON_OP_MUL, e, e, s);
	binary_op(NEURON_OP_SUB, e, g, e);
	return input_dtype == e.scalar_type() ? e : e.to(input_dtype);
}

// ---- nll_loss (2-d input [N, C] or 1-d [C]; class dim 1) ----

enum { kNone = 0, kMean = 1, kSum = 2 };

// Per-sample weights: (target != ignore) * weight[target], and a safe target.
std::pair<Tensor, Tensor> nll_weights(const Tensor &input2, const Tensor &target1, const std::optional<Tensor> &weight,
				      int64_t ignore_index)
{
	const int64_t n = target1.numel();
	Tensor valid = at::empty({n}, input2.options().dtype(c10::kBool));
	Tensor tgt = target1.reshape({n});
	{
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
		cmd.operands[0] = desc(valid);
		cmd.operands[1] = desc(tgt);
		cmd.iscalars[0] = NEURON_CMP_NE;
		cmd.fscalars.f[0] = static_cast<double>(ignore_index);
		if (n)
			submit(valid, cmd);
	}
	Tensor zero = at::empty({}, tgt.options());
	fill_cmd(zero, 0);
	Tensor safe = at::empty({n}, tgt.options());
	where_cmd(safe, valid, tgt, zero);
	Tensor w = at::empty({n}, input2.options());
	if (n)
		copy_cast_into(w, valid);
	if (weight && weight->defined()) {
		Tensor ws = at::empty({n}, input2.options());
		index_select_cmd(ws, *weight, 0, safe);
		binary_op(NEURON_OP_MUL, w, w, ws);
	}
	return {w, safe};
}

bool nll_ok(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight)
{
	return float_dev(self) && (self.dim() == 2 || self.dim() == 1) && index_ok(target) &&
	       (!weight || !weight->defined() || float_dev(*weight));
}

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
					    int64_t reduction, int64_t ignore_index)
{
	NEURON_NATIVE("nll_loss_forward");
	if (!nll_ok(self, target, weight)) {
		note_fallback("nll_loss_forward");
		auto [o, t] = at::nll_loss_forward(self.cpu(), target.cpu(),
						   weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
						   reduction, ignore_index);
		return {o.to(self.device()), t.to(self.device())};
	}
	Tensor in2 = self.dim() == 1 ? self.unsqueeze(0) : self;
	const int64_t n = in2.size(0);
	auto [w, safe] = nll_weights(in2, target, weight, ignore_index);
	Tensor picked = at::empty({n, 1}, self.options());
	if (n) {
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_GATHER, 3);
		cmd.operands[0] = desc(picked);
		cmd.operands[1] = desc(in2);
		cmd.operands[2] = desc(safe.view({n, 1}));
		cmd.iscalars[0] = 1;
		submit(picked, cmd);
	}
	Tensor losses = at::empty({n}, self.options());
	binary_op(NEURON_OP_MUL, losses, picked.view({n}), w);
	scalar_op(NEURON_OP_MUL_SCALAR, losses, losses, -1.0);
	Tensor total = at::empty({}, self.options());
	reduce_cmd(NEURON_OP_SUM, total.view({1}), w, 1);
	if (n == 0)
		fill_cmd(total, 0);
	if (reduction == kNone)
		return {self.dim() == 1 ? losses.view(c10::IntArrayRef{}) : losses, total};
	Tensor out = at::empty({}, self.options());
	if (n)
		reduce_cmd(NEURON_OP_SUM, out.view({1}), losses, 1);
	else
		fill_cmd(out, reduction == kMean ? NAN : 0.0);
	if (reduction == kMean && n)
		binary_op(NEURON_OP_DIV, out, out, total);
	return {out, total};
}

Tensor nll_loss_backward(const Tensor &grad, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
			 int64_t reduction, int64_t ignore_index, const Tensor &total_weight)
{
	NEURON_NATIVE("nll_loss_backward");
	if (!nll_ok(self, target, weight) || !float_dev(grad)) {
		note_fallback("nll_loss_backward");
		return at::nll_loss_backward(grad.cpu(), self.cpu(), target.cpu(),
					     weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
					     reduction, ignore_index, total_weight.cpu())
			.to(self.device());
	}
	Tensor in2 = self.dim() == 1 ? self.unsqueeze(0) : self;
	const int64_t n = in2.size(0);
	Tensor gi = at::empty(in2.sizes(), self.options());
	fill_cmd(gi, 0);
	if (n == 0)
		return gi.view(self.sizes());
	auto [w, safe] = nll_weights(in2, target, weight, ignore_index);
	Tensor src = at::empty({n}, self.options());
	// src = -w * grad (/ total_weight for mean)
	binary_op(NEURON_OP_MUL, src, w, reduction == kNone ? grad.reshape({n}) : grad.reshape({}).expand({n}));
	scalar_op(NEURON_OP_MUL_SCALAR, src, src, -1.0);
	if (reduction == kMean)
		binary_op(NEURON_OP_DIV, src, src, total_weight.reshape({}).expand({n}));
	scatter_add_cmd(gi, 1, safe.view({n, 1}), src.view({n, 1}));
	return gi.view(self.sizes());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_log_softmax", &log_softmax);
	m.impl("_log_softmax_backward_data", &log_softmax_backward);
	m.impl("nll_loss_forward", &nll_loss_forward);
	m.impl("nll_loss_backward", &nll_loss_backward);
}

} // namespace torch_neuron
