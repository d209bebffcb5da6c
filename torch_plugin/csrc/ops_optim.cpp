// Fused optimizer steps: torch.optim.Adam / AdamW with fused=True call
// _fused_adam_ / _fused_adamw_, which run here as one chip ADAM_STEP command per
// parameter (instead of ~8 elementwise commands each on the foreach path). The
// step counts stay on the device: the chip reads them, so nothing waits on the host.
// SGD with fused=True calls _fused_sgd_: a few elementwise commands per parameter
// (the chip's ADD/SUB take an alpha, so each line of the update is one command).
#include "cmds.h"

#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace torch_neuron {

namespace {

using at::TensorList;

bool adam_native(TensorList params, TensorList grads, TensorList avgs, TensorList sqs, TensorList steps, bool amsgrad,
		 const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	if (amsgrad || (grad_scale && grad_scale->defined()) || (found_inf && found_inf->defined()))
		return false;
	for (size_t i = 0; i < params.size(); ++i) {
		const Tensor *state[] = {&params[i], &grads[i], &avgs[i], &sqs[i]};
		for (const Tensor *t : state)
			if (!float_dev(*t) || t->sizes() != params[i].sizes())
				return false;
		if (!chip_ok(steps[i]) || steps[i].numel() != 1 || steps[i].scalar_type() == c10::kBool)
			return false;
	}
	return true;
}

// The CPU's fused kernel on copies, written back (amsgrad, AMP grad scaling).
void adam_on_cpu(bool decoupled, TensorList params, TensorList grads, TensorList avgs, TensorList sqs,
		 TensorList maxs, TensorList steps, double lr, double beta1, double beta2, double wd, double eps,
		 bool amsgrad, bool maximize, const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	note_fallback(decoupled ? "_fused_adamw_" : "_fused_adam_");
	auto cpu = [](TensorList l) {
		std::vector<Tensor> v;
		for (const Tensor &t : l)
			v.push_back(t.cpu());
		return v;
	};
	auto p = cpu(params), g = cpu(grads), m = cpu(avgs), s = cpu(sqs), mx = cpu(maxs), st = cpu(steps);
	auto opt_cpu = [](const std::optional<Tensor> &t) { return t && t->defined() ? std::optional<Tensor>(t->cpu()) : t; };
	if (decoupled)
		at::_fused_adamw_(p, g, m, s, mx, st, lr, beta1, beta2, wd, eps, amsgrad, maximize, opt_cpu(grad_scale),
				  opt_cpu(found_inf));
	else
		at::_fused_adam_(p, g, m, s, mx, st, lr, beta1, beta2, wd, eps, amsgrad, maximize, opt_cpu(grad_scale),
				 opt_cpu(found_inf));
	for (size_t i = 0; i < params.size(); ++i) {
		params[i].copy_(p[i]);
		avgs[i].copy_(m[i]);
		sqs[i].copy_(s[i]);
		if (i < maxs.size())
			maxs[i].copy_(mx[i]);
	}
}

void adam_step_cmd(bool decoupled, const Tensor &param, const Tensor &grad, const Tensor &avg, const Tensor &sq,
		   const Tensor &step, double lr, double beta1, double beta2, double wd, double eps, bool maximize)
{
	if (param.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_ADAM_STEP, 5);
	cmd.operands[0] = desc(param);
	cmd.operands[1] = desc(avg);
	cmd.operands[2] = desc(sq);
	cmd.operands[3] = desc(grad);
	cmd.operands[4] = desc(step.reshape({}));
	cmd.fscalars.f[0] = lr;
	cmd.fscalars.f[1] = beta1;
	cmd.fscalars.f[2] = beta2;
	cmd.fscalars.f[3] = eps;
	cmd.iscalars[0] = (decoupled ? NEURON_ADAM_DECOUPLED : 0) | (maximize ? NEURON_ADAM_MAXIMIZE : 0);
	std::memcpy(&cmd.iscalars[1], &wd, sizeof(wd));
	submit(param, cmd);
}

template <bool Decoupled>
void fused_adam(TensorList params, TensorList grads, TensorList avgs, TensorList sqs, TensorList maxs,
		TensorList steps, double lr, double beta1, double beta2, double wd, double eps, bool amsgrad, bool maximize,
		const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	NEURON_NATIVE(Decoupled ? "_fused_adamw_" : "_fused_adam_");
	const size_t n = params.size();
	TORCH_CHECK(grads.size() == n && avgs.size() == n && sqs.size() == n && steps.size() == n,
		    "_fused_adam(w)_: params, grads, exp_avgs, exp_avg_sqs and state_steps must have one length");
	TORCH_CHECK(!amsgrad || maxs.size() == n, "_fused_adam(w)_: amsgrad needs one max_exp_avg_sq per param");
	if (!adam_native(params, grads, avgs, sqs, steps, amsgrad, grad_scale, found_inf)) {
		adam_on_cpu(Decoupled, params, grads, avgs, sqs, maxs, steps, lr, beta1, beta2, wd, eps, amsgrad, maximize,
			    grad_scale, found_inf);
		return;
	}
	// Hyperparameters the chip refuses are the caller's error: say so here, with
	// torch's words, rather than as a device fault.
	TORCH_CHECK(lr >= 0 && std::isfinite(lr), "Invalid learning rate: ", lr);
	TORCH_CHECK(eps >= 0 && std::isfinite(eps), "Invalid epsilon value: ", eps);
	TORCH_CHECK(beta1 >= 0 && beta1 < 1, "Invalid beta parameter at index 0: ", beta1);
	TORCH_CHECK(beta2 >= 0 && beta2 < 1, "Invalid beta parameter at index 1: ", beta2);
	TORCH_CHECK(wd >= 0 && std::isfinite(wd), "Invalid weight_decay value: ", wd);
	for (size_t i = 0; i < n; ++i) {
		// The chip forbids any overlap between the four tensors; a grad aliasing its
		// param (never the case in torch.optim) would get private copies.
		const Tensor grad = mem_overlap(grads[i], params[i]) || mem_overlap(grads[i], avgs[i]) ||
						    mem_overlap(grads[i], sqs[i])
					    ? grads[i].clone()
					    : grads[i];
		adam_step_cmd(Decoupled, params[i], grad, avgs[i], sqs[i], steps[i], lr, beta1, beta2, wd, eps, maximize);
	}
}

// ---- SGD (torch.optim.SGD(fused=True)) ----

// The CPU's fused kernel on copies, written back (AMP grad scaling).
void sgd_on_cpu(TensorList params, TensorList grads, TensorList bufs, double wd, double momentum,
		const std::optional<Tensor> &lr_tensor, double lr, double dampening, bool nesterov, bool maximize,
		bool first, const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	note_fallback("_fused_sgd_");
	auto cpu = [](TensorList l) {
		std::vector<Tensor> v;
		for (const Tensor &t : l)
			v.push_back(t.cpu());
		return v;
	};
	auto p = cpu(params), g = cpu(grads), b = cpu(bufs);
	if (lr_tensor)
		at::_fused_sgd_(p, g, b, wd, momentum, lr_tensor->cpu(), dampening, nesterov, maximize, first,
				cpu_opt(grad_scale), cpu_opt(found_inf));
	else
		at::_fused_sgd_(p, g, b, wd, momentum, lr, dampening, nesterov, maximize, first, cpu_opt(grad_scale),
				cpu_opt(found_inf));
	for (size_t i = 0; i < params.size(); ++i) {
		params[i].copy_(p[i]);
		if (i < bufs.size())
			bufs[i].copy_(b[i]);
	}
}

// As PyTorch's fused SGD kernel:
//   g = maximize ? -grad : grad;  g += weight_decay * param
//   buf = first step ? g : momentum * buf + (1 - dampening) * g     (momentum != 0)
//   g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
void fused_sgd_impl(TensorList params, TensorList grads, TensorList bufs, double wd, double momentum,
		    const std::optional<Tensor> &lr_tensor, double lr, double dampening, bool nesterov, bool maximize,
		    bool first, const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	NEURON_NATIVE("_fused_sgd_");
	const size_t n = params.size();
	TORCH_CHECK(grads.size() == n, "_fused_sgd_: params and grads must have one length");
	TORCH_CHECK(momentum == 0 || bufs.size() == n, "_fused_sgd_: momentum needs one momentum buffer per param");
	bool native = !(grad_scale && grad_scale->defined()) && !(found_inf && found_inf->defined()) &&
		      (!lr_tensor || (chip_ok(*lr_tensor) && lr_tensor->numel() == 1));
	for (size_t i = 0; native && i < n; ++i)
		native = float_dev(params[i]) && float_dev(grads[i]) && grads[i].sizes() == params[i].sizes() &&
			 (momentum == 0 || (float_dev(bufs[i]) && bufs[i].sizes() == params[i].sizes()));
	if (!native) {
		sgd_on_cpu(params, grads, bufs, wd, momentum, lr_tensor, lr, dampening, nesterov, maximize, first, grad_scale,
			   found_inf);
		return;
	}
	for (size_t i = 0; i < n; ++i) {
		const Tensor &param = params[i];
		if (param.numel() == 0)
			continue;
		Tensor g = grads[i];
		if (maximize || wd != 0) {
			Tensor t = at::empty(param.sizes(), param.options());
			if (maximize)
				scalar_op(NEURON_OP_MUL_SCALAR, t, g, -1.0);
			else
				copy_cast_into(t, g);
			if (wd != 0)
				binary_op(NEURON_OP_ADD, t, t, param, wd);
			g = t;
		}
		if (momentum != 0) {
			const Tensor &buf = bufs[i];
			if (first) {
				copy_cast_into(buf, g);
			} else {
				scalar_op(NEURON_OP_MUL_SCALAR, buf, buf, momentum);
				binary_op(NEURON_OP_ADD, buf, buf, g, 1.0 - dampening);
			}
			if (nesterov) {
				Tensor t = at::empty(param.sizes(), param.options());
				binary_op(NEURON_OP_ADD, t, g, buf, momentum);
				g = t;
			} else {
				g = buf;
			}
		}
		if (lr_tensor) { // lr read on the device: no host sync
			Tensor t = at::empty(param.sizes(), param.options());
			binary_op(NEURON_OP_MUL, t, g, lr_tensor->reshape({}));
			binary_op(NEURON_OP_SUB, param, param, t);
		} else {
			binary_op(NEURON_OP_SUB, param, param, g, lr);
		}
	}
}

void fused_sgd(TensorList params, TensorList grads, TensorList bufs, double wd, double momentum, double lr,
	       double dampening, bool nesterov, bool maximize, bool first, const std::optional<Tensor> &grad_scale,
	       const std::optional<Tensor> &found_inf)
{
	fused_sgd_impl(params, grads, bufs, wd, momentum, std::nullopt, lr, dampening, nesterov, maximize, first, grad_scale,
		       found_inf);
}

void fused_sgd_tensor_lr(TensorList params, TensorList grads, TensorList bufs, double wd, double momentum,
			 const Tensor &lr, double dampening, bool nesterov, bool maximize, bool first,
			 const std::optional<Tensor> &grad_scale, const std::optional<Tensor> &found_inf)
{
	fused_sgd_impl(params, grads, bufs, wd, momentum, lr.device().is_privateuseone() ? std::optional<Tensor>(lr) : std::nullopt,
		       lr.device().is_privateuseone() ? 0.0 : lr.item<double>(), dampening, nesterov, maximize, first,
		       grad_scale, found_inf);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_fused_sgd_", &fused_sgd);
	m.impl("_fused_sgd_.tensor_lr", &fused_sgd_tensor_lr);
	m.impl("_fused_adam_", &fused_adam<false>);
	m.impl("_fused_adamw_", &fused_adam<true>);
}

} // namespace torch_neuron
