// torch.amp.GradScaler("neuron"): the two kernels it runs each step, each on the
// chip (ISA 1.4, cmd.h): one AMP_UNSCALE per gradient (inf/NaN check and unscale,
// found_inf set on the device, so the host never waits), one AMP_UPDATE_SCALE.
#include "cmds.h"

#include <torch/library.h>

namespace torch_neuron {

namespace {

void check_scalar_f32(const Tensor &t, const char *what, const Tensor &like)
{
	TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor.");
	TORCH_CHECK(t.scalar_type() == c10::kFloat, what, " must be a float tensor.");
	TORCH_CHECK(t.device() == like.device(), what, " is on ", t.device(), " but the tensors are on ", like.device());
}

void amp_unscale(at::TensorList grads, Tensor &found_inf, const Tensor &inv_scale)
{
	NEURON_NATIVE("_amp_foreach_non_finite_check_and_unscale_");
	for (const Tensor &g : grads) {
		TORCH_CHECK(g.device() == found_inf.device(), "neuron: a gradient on ", g.device(),
			    " with found_inf on ", found_inf.device());
		TORCH_CHECK(at::isFloatingType(g.scalar_type()) && g.layout() == c10::kStrided,
			    "neuron: _amp_foreach_non_finite_check_and_unscale_ takes strided floating gradients, got ",
			    g.scalar_type());
	}
	check_scalar_f32(found_inf, "found_inf", found_inf);
	check_scalar_f32(inv_scale, "inv_scale", found_inf);
	for (const Tensor &g : grads) {
		if (g.numel() == 0)
			continue;
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_AMP_UNSCALE, 3);
		cmd.operands[0] = desc(g);
		cmd.operands[1] = desc(found_inf.view({1}));
		cmd.operands[2] = desc(inv_scale.view({1}));
		submit(g, cmd);
	}
}

Tensor &amp_update_scale(Tensor &scale, Tensor &growth_tracker, const Tensor &found_inf, double growth,
			 double backoff, int64_t interval)
{
	NEURON_NATIVE("_amp_update_scale_");
	check_scalar_f32(scale, "current_scale", scale);
	check_scalar_f32(found_inf, "found_inf", scale);
	TORCH_CHECK(growth_tracker.numel() == 1 && growth_tracker.scalar_type() == c10::kInt &&
			    growth_tracker.device() == scale.device(),
		    "growth_tracker must be a 1-element int tensor on ", scale.device());
	TORCH_CHECK(interval >= 1, "growth_interval must be >= 1, got ", interval);
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_AMP_UPDATE_SCALE, 3);
	cmd.operands[0] = desc(scale.view({1}));
	cmd.operands[1] = desc(growth_tracker.view({1}));
	cmd.operands[2] = desc(found_inf.view({1}));
	cmd.fscalars.f[0] = growth;
	cmd.fscalars.f[1] = backoff;
	cmd.iscalars[0] = interval;
	submit(scale, cmd);
	return scale;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_amp_foreach_non_finite_check_and_unscale_", &amp_unscale);
	m.impl("_amp_update_scale_", &amp_update_scale);
}

} // namespace torch_neuron
