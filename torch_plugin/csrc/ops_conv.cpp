// Convolution: 2-d, groups 1, as im2col (one strided COPY) + batched matmul, with
// its backward. Other convolutions run on the host, counted and warned about as a
// fallback here (the generic fallback cannot reach them: ATen registers a "not
// implemented" kernel for convolution_overrideable).
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// Native 2-d convolution (groups 1, not transposed) as im2col + batched matmul:
// the column matrix is a strided view of the zero-padded input, gathered by one COPY.
struct Conv2dGeom {
	int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, hp, wp;
};

bool conv2d_native(const Tensor &input, const Tensor &weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
		   c10::IntArrayRef dilation, bool transposed, int64_t groups, Conv2dGeom &g)
{
	if (transposed || groups != 1 || input.dim() != 4 || weight.dim() != 4 || !float_dev(input) ||
	    !float_dev(weight) || input.scalar_type() != weight.scalar_type() || stride.size() != 2 ||
	    padding.size() != 2 || dilation.size() != 2)
		return false;
	g.n = input.size(0), g.c = input.size(1), g.h = input.size(2), g.w = input.size(3);
	g.o = weight.size(0), g.kh = weight.size(2), g.kw = weight.size(3);
	g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1], g.dh = dilation[0], g.dw = dilation[1];
	g.hp = g.h + 2 * g.ph, g.wp = g.w + 2 * g.pw;
	g.oh = (g.hp - g.dh * (g.kh - 1) - 1) / g.sh + 1;
	g.ow = (g.wp - g.dw * (g.kw - 1) - 1) / g.sw + 1;
	return weight.size(1) == g.c && g.oh > 0 && g.ow > 0 && g.n > 0;
}

// [N, C*kh*kw, OH*OW] columns of the (padded) input.
Tensor im2col(const Tensor &input, const Conv2dGeom &g)
{
	Tensor padded = input.contiguous();
	if (g.ph || g.pw) {
		padded = at::empty({g.n, g.c, g.hp, g.wp}, input.options());
		fill_cmd(padded, 0);
		padded.narrow(2, g.ph, g.h).narrow(3, g.pw, g.w).copy_(input);
	}
	Tensor win = padded.as_strided({g.n, g.c, g.kh, g.kw, g.oh, g.ow},
				       {g.c * g.hp * g.wp, g.hp * g.wp, g.dh * g.wp, g.dw, g.sh * g.wp, g.sw});
	Tensor cols = at::empty({g.n, g.c, g.kh, g.kw, g.oh, g.ow}, input.options());
	copy_cast_into(cols, win);
	return cols.view({g.n, g.c * g.kh * g.kw, g.oh * g.ow});
}

Tensor conv_ovr(const Tensor &input, const Tensor &weight, const std::optional<Tensor> &bias, c10::IntArrayRef stride,
		c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
		int64_t groups)
{
	Conv2dGeom g;
	if (conv2d_native(input, weight, stride, padding, dilation, transposed, groups, g)) {
		NEURON_NATIVE("convolution");
		Tensor cols = im2col(input, g);
		const int64_t ckk = g.c * g.kh * g.kw;
		Tensor w2 = weight.contiguous().view({1, g.o, ckk}).expand({g.n, g.o, ckk});
		Tensor out = at::empty({g.n, g.o, g.oh * g.ow}, input.options());
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_MATMUL, 3);
		cmd.operands[0] = desc(out);
		cmd.operands[1] = desc(w2);
		cmd.operands[2] = desc(cols);
		cmd.fscalars.f[0] = 1.0;
		submit(out, cmd);
		if (bias && bias->defined())
			binary_op(NEURON_OP_ADD, out, out, bias->view({1, g.o, 1}));
		return out.view({g.n, g.o, g.oh, g.ow});
	}
	note_fallback("aten::convolution_overrideable");
	return at::convolution(input.cpu(), weight.cpu(), cpu_opt(bias), stride, padding, dilation, transposed,
			       output_padding, groups)
		.to(input.device());
}
std::tuple<Tensor, Tensor, Tensor> conv_bwd_ovr(const Tensor &grad, const Tensor &input, const Tensor &weight,
						c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
						bool transposed, c10::IntArrayRef output_padding, int64_t groups,
						std::array<bool, 3> mask)
{
	Conv2dGeom g;
	if (conv2d_native(input, weight, stride, padding, dilation, transposed, groups, g) && float_dev(grad)) {
		NEURON_NATIVE("convolution_backward");
		const int64_t ckk = g.c * g.kh * g.kw, l = g.oh * g.ow;
		Tensor go = grad.contiguous().view({g.n, g.o, l});
		Tensor gi, gw, gb;
		if (mask[1]) {
			Tensor cols = im2col(input, g);
			Tensor per = at::empty({g.n, g.o, ckk}, grad.options());
			neuron_cmd cmd;
			cmd_init(cmd, NEURON_OP_MATMUL, 3);
			cmd.operands[0] = desc(per);
			cmd.operands[1] = desc(go);
			cmd.operands[2] = desc(cols.transpose(1, 2));
			cmd.fscalars.f[0] = 1.0;
			submit(per, cmd);
			gw = at::empty({1, g.o, ckk}, grad.options());
			reduce_cmd(NEURON_OP_SUM, gw, per, 1);
			gw = gw.view(weight.sizes());
		}
		if (mask[2]) {
			gb = at::empty({1, g.o, 1}, grad.options());
			reduce_cmd(NEURON_OP_SUM, gb, go, 0x5);
			gb = gb.view({g.o});
		}
		if (mask[0]) {
			Tensor wt = weight.contiguous().view({1, g.o, ckk}).expand({g.n, g.o, ckk}).transpose(1, 2);
			Tensor gcols = at::empty({g.n, ckk, l}, grad.options());
			neuron_cmd cmd;
			cmd_init(cmd, NEURON_OP_MATMUL, 3);
			cmd.operands[0] = desc(gcols);
			cmd.operands[1] = desc(wt);
			cmd.operands[2] = desc(go);
			cmd.fscalars.f[0] = 1.0;
			submit(gcols, cmd);
			Tensor gc = gcols.view({g.n, g.c, g.kh, g.kw, g.oh, g.ow});
			Tensor gp = at::empty({g.n, g.c, g.hp, g.wp}, grad.options());
			fill_cmd(gp, 0);
			// col2im: one accumulate per kernel tap (each tap's window has no repeats).
			for (int64_t i = 0; i < g.kh; ++i)
				for (int64_t j = 0; j < g.kw; ++j) {
					Tensor dst = gp.as_strided({g.n, g.c, g.oh, g.ow}, {g.c * g.hp * g.wp, g.hp * g.wp, g.sh * g.wp, g.sw},
								   gp.storage_offset() + i * g.dh * g.wp + j * g.dw);
					binary_op(NEURON_OP_ADD, dst, dst, gc.select(2, i).select(2, j));
				}
			gi = (g.ph || g.pw) ? gp.narrow(2, g.ph, g.h).narrow(3, g.pw, g.w).contiguous() : gp;
		}
		return {gi, gw, gb};
	}
	note_fallback("aten::convolution_backward_overrideable");
	std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
	auto [a, b, c] = at::convolution_backward(grad.cpu(), input.cpu(), weight.cpu(), c10::IntArrayRef(bias_sizes),
						  stride, padding, dilation, transposed, output_padding, groups, mask);
	auto mv = [&](const Tensor &t) { return t.defined() ? t.to(input.device()) : t; };
	return {mv(a), mv(b), mv(c)};
}

// amin(x) = -amax(-x)

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("convolution_overrideable", &conv_ovr);
	m.impl("convolution_backward_overrideable", &conv_bwd_ovr);
}

} // namespace torch_neuron
