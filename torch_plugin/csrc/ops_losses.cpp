// Regression and binary losses (+ backward) composed of native ops: mse_loss,
// binary_cross_entropy, binary_cross_entropy_with_logits, smooth_l1_loss,
// huber_loss, and nll_loss2d as nll_loss over the flattened pixels. Each follows
// the formula of PyTorch's CPU kernel (aten/src/ATen/native/Loss.cpp), including
// BCE's log clamp at -100 and the numerically stable log-sigmoid of the logits
// form.
#include "cmds.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// reduction: 0 none, 1 mean, 2 sum (at::Reduction).
Tensor reduce_loss(const Tensor &l, int64_t reduction)
{
	if (reduction == 1)
		return l.mean();
	if (reduction == 2)
		return l.sum();
	return l;
}

// The gradient of a reduced loss, broadcast back: grad (0-d) / N for mean.
Tensor grad_scale(const Tensor &grad, const Tensor &like, int64_t reduction)
{
	if (reduction == 1)
		return grad / static_cast<double>(std::max<int64_t>(like.numel(), 1));
	return grad;
}

bool float_inputs(std::initializer_list<const Tensor *> ts)
{
	for (const Tensor *t : ts)
		if (t->defined() && !float_dev(*t))
			return false;
	return true;
}

Tensor mse_loss(const Tensor &self, const Tensor &target, int64_t reduction)
{
	NEURON_NATIVE("mse_loss");
	if (!float_inputs({&self, &target})) {
		note_fallback("mse_loss");
		return at::mse_loss(self.cpu(), target.cpu(), reduction).to(self.device());
	}
	const Tensor d = self - target;
	return reduce_loss(d * d, reduction);
}
Tensor mse_loss_backward(const Tensor &grad, const Tensor &self, const Tensor &target, int64_t reduction)
{
	NEURON_NATIVE("mse_loss_backward");
	if (!float_inputs({&grad, &self, &target})) {
		note_fallback("mse_loss_backward");
		return at::mse_loss_backward(grad.cpu(), self.cpu(), target.cpu(), reduction).to(self.device());
	}
	return (self - target) * (grad_scale(grad, self, reduction) * 2.0);
}

// -w * (t log(x) + (1 - t) log(1 - x)), each log clamped at -100.
Tensor bce(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight, int64_t reduction)
{
	NEURON_NATIVE("binary_cross_entropy");
	const Tensor w = weight ? *weight : Tensor();
	if (!float_inputs({&self, &target, &w})) {
		note_fallback("binary_cross_entropy");
		return at::binary_cross_entropy(self.cpu(), target.cpu(), cpu_opt(weight), reduction).to(self.device());
	}
	const Tensor log_x = at::clamp_min(at::log(self), -100);
	const Tensor log_1mx = at::clamp_min(at::log1p(-self), -100);
	Tensor l = -(target * log_x + (1 - target) * log_1mx);
	if (w.defined())
		l = l * w;
	return reduce_loss(l, reduction);
}
// grad * w * (x - t) / max(x (1 - x), 1e-12)
Tensor bce_backward(const Tensor &grad, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
		    int64_t reduction)
{
	NEURON_NATIVE("binary_cross_entropy_backward");
	const Tensor w = weight ? *weight : Tensor();
	if (!float_inputs({&grad, &self, &target, &w})) {
		note_fallback("binary_cross_entropy_backward");
		return at::binary_cross_entropy_backward(grad.cpu(), self.cpu(), target.cpu(), cpu_opt(weight), reduction)
			.to(self.device());
	}
	Tensor g = grad_scale(grad, self, reduction) * (self - target) / at::clamp_min((1 - self) * self, 1e-12);
	if (w.defined())
		g = g * w;
	return g;
}

// (1 - t) x + lw (log(1 + exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t.
Tensor bce_logits(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
		  const std::optional<Tensor> &pos_weight, int64_t reduction)
{
	NEURON_NATIVE("binary_cross_entropy_with_logits");
	const Tensor w = weight ? *weight : Tensor(), pw = pos_weight ? *pos_weight : Tensor();
	if (!float_inputs({&self, &target, &w, &pw})) {
		note_fallback("binary_cross_entropy_with_logits");
		return at::binary_cross_entropy_with_logits(self.cpu(), target.cpu(), cpu_opt(weight), cpu_opt(pos_weight),
							   reduction)
			.to(self.device());
	}
	const Tensor softplus_neg = at::log1p(at::exp(-at::abs(self))) + at::clamp_min(-self, 0); // -log(sigmoid(x))
	Tensor l;
	if (pw.defined()) {
		const Tensor lw = (pw - 1) * target + 1;
		l = (1 - target) * self + lw * softplus_neg;
	} else {
		l = (1 - target) * self + softplus_neg;
	}
	if (w.defined())
		l = l * w;
	return reduce_loss(l, reduction);
}

Tensor smooth_l1(const Tensor &self, const Tensor &target, int64_t reduction, double beta)
{
	NEURON_NATIVE("smooth_l1_loss");
	TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
	if (!float_inputs({&self, &target})) {
		note_fallback("smooth_l1_loss");
		return at::smooth_l1_loss(self.cpu(), target.cpu(), reduction, beta).to(self.device());
	}
	const Tensor z = at::abs(self - target);
	if (beta == 0)
		return reduce_loss(z, reduction);
	return reduce_loss(at::where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta), reduction);
}
Tensor smooth_l1_backward(const Tensor &grad, const Tensor &self, const Tensor &target, int64_t reduction, double beta)
{
	NEURON_NATIVE("smooth_l1_loss_backward");
	if (!float_inputs({&grad, &self, &target})) {
		note_fallback("smooth_l1_loss_backward");
		return at::smooth_l1_loss_backward(grad.cpu(), self.cpu(), target.cpu(), reduction, beta).to(self.device());
	}
	const Tensor d = self - target;
	const Tensor g = grad_scale(grad, self, reduction);
	if (beta == 0)
		return at::sign(d) * g;
	return at::where(at::abs(d) < beta, d / beta, at::sign(d)) * g;
}
Tensor &smooth_l1_backward_o(const Tensor &grad, const Tensor &self, const Tensor &target, int64_t reduction,
			      double beta, Tensor &out)
{
	return assign_out(out, smooth_l1_backward(grad, self, target, reduction, beta));
}

Tensor huber(const Tensor &self, const Tensor &target, int64_t reduction, double delta)
{
	NEURON_NATIVE("huber_loss");
	TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
	if (!float_inputs({&self, &target})) {
		note_fallback("huber_loss");
		return at::huber_loss(self.cpu(), target.cpu(), reduction, delta).to(self.device());
	}
	const Tensor z = at::abs(self - target);
	return reduce_loss(at::where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta), reduction);
}
Tensor &huber_backward_o(const Tensor &grad, const Tensor &self, const Tensor &target, int64_t reduction, double delta,
			 Tensor &out)
{
	NEURON_NATIVE("huber_loss_backward");
	if (!float_inputs({&grad, &self, &target})) {
		note_fallback("huber_loss_backward");
		return assign_out(out, at::huber_loss_backward(grad.cpu(), self.cpu(), target.cpu(), reduction, delta));
	}
	const Tensor d = self - target;
	const Tensor g = grad_scale(grad, self, reduction);
	return assign_out(out, at::where(at::abs(d) <= delta, d, at::sign(d) * delta) * g);
}

// nll_loss2d: the pixels of [N, C, *] as rows of nll_loss (ops_loss.cpp).
Tensor pixels_as_rows(const Tensor &self)
{
	return self.movedim(1, -1).reshape({-1, self.size(1)});
}
std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
					      int64_t reduction, int64_t ignore_index)
{
	NEURON_NATIVE("nll_loss2d_forward");
	TORCH_CHECK(self.dim() == 4 && target.dim() == 3, "nll_loss2d: expected input [N, C, H, W] and target [N, H, W]");
	auto [out, total] = at::nll_loss_forward(pixels_as_rows(self), target.reshape({-1}), weight, reduction, ignore_index);
	if (reduction == 0)
		out = out.view(target.sizes());
	return {out, total};
}
Tensor nll_loss2d_backward(const Tensor &grad, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
			   int64_t reduction, int64_t ignore_index, const Tensor &total_weight)
{
	NEURON_NATIVE("nll_loss2d_backward");
	const Tensor g = reduction == 0 ? grad.reshape({-1}) : grad;
	const Tensor rows = at::nll_loss_backward(g, pixels_as_rows(self), target.reshape({-1}), weight, reduction,
						  ignore_index, total_weight);
	std::vector<int64_t> shape{self.size(0), self.size(2), self.size(3), self.size(1)};
	return rows.view(shape).movedim(-1, 1).contiguous();
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("mse_loss", &mse_loss);
	m.impl("mse_loss_backward", &mse_loss_backward);
	m.impl("binary_cross_entropy", &bce);
	m.impl("binary_cross_entropy_backward", &bce_backward);
	m.impl("binary_cross_entropy_with_logits", &bce_logits);
	m.impl("smooth_l1_loss", &smooth_l1);
	m.impl("smooth_l1_loss_backward.grad_input", &smooth_l1_backward_o);
	m.impl("huber_loss", &huber);
	m.impl("huber_loss_backward.out", &huber_backward_o);
	m.impl("nll_loss2d_forward", &nll_loss2d_forward);
	m.impl("nll_loss2d_backward", &nll_loss2d_backward);
}

} // namespace torch_neuron
