// Convolution: 1-d, 2-d and 3-d, any groups (depthwise too), plain and transposed,
// with backward, as im2col (one strided COPY) + batched matmuls; col2im (the
// transposed direction) is one accumulate per kernel tap. Invalid or unsupported
// cases run on the host, counted and warned about as a fallback here (the generic
// fallback cannot reach them: ATen registers a "not implemented" kernel for
// convolution_overrideable).
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// The geometry in the "convolution sense" for both directions: columns are taken
// from a [n, c, in...] tensor (the input of a convolution; the output of a
// transposed one) and give a [n, o, out...] tensor (the other side).
struct ConvGeom {
	int nd = 0;                          // spatial dims, 1-3
	int64_t n = 0, c = 0, o = 0, g = 1;  // batch, channels of the column side and of the other, groups
	int64_t in[3]{}, k[3]{}, s[3]{}, p[3]{}, d[3]{}, out[3]{}, hp[3]{};
	int64_t K() const { int64_t r = 1; for (int i = 0; i < nd; ++i) r *= k[i]; return r; }
	int64_t L() const { int64_t r = 1; for (int i = 0; i < nd; ++i) r *= out[i]; return r; }
	int64_t P() const { int64_t r = 1; for (int i = 0; i < nd; ++i) r *= hp[i]; return r; }
	bool padded() const { for (int i = 0; i < nd; ++i) if (p[i]) return true; return false; }
	// Row-major strides of the padded spatial dims.
	int64_t sp(int i) const { int64_t r = 1; for (int j = i + 1; j < nd; ++j) r *= hp[j]; return r; }
	std::vector<int64_t> shape(int64_t ch, const int64_t *sp_sizes) const
	{
		std::vector<int64_t> r{n, ch};
		r.insert(r.end(), sp_sizes, sp_sizes + nd);
		return r;
	}
};

bool conv_geom(const Tensor &input, const Tensor &weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
	       c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding, int64_t groups, ConvGeom &g)
{
	const int nd = static_cast<int>(input.dim()) - 2;
	if (nd < 1 || nd > 3 || weight.dim() != input.dim() || !float_dev(input) || !float_dev(weight) ||
	    input.scalar_type() != weight.scalar_type() || static_cast<int>(stride.size()) != nd ||
	    static_cast<int>(padding.size()) != nd || static_cast<int>(dilation.size()) != nd || groups < 1 ||
	    (transposed && static_cast<int>(output_padding.size()) != nd))
		return false;
	g.nd = nd;
	g.g = groups;
	g.n = input.size(0);
	if (!transposed) {
		g.c = input.size(1);
		g.o = weight.size(0);
		if (weight.size(1) * groups != g.c)
			return false;
	} else {
		g.o = input.size(1);
		g.c = weight.size(1) * groups;
		if (weight.size(0) != g.o)
			return false;
	}
	if (g.c % groups || g.o % groups)
		return false;
	for (int i = 0; i < nd; ++i) {
		g.k[i] = weight.size(2 + i), g.s[i] = stride[i], g.p[i] = padding[i], g.d[i] = dilation[i];
		if (g.s[i] < 1 || g.d[i] < 1 || g.p[i] < 0)
			return false;
		const int64_t span = g.d[i] * (g.k[i] - 1) + 1;
		if (transposed)
			g.in[i] = (input.size(2 + i) - 1) * g.s[i] - 2 * g.p[i] + span + output_padding[i];
		else
			g.in[i] = input.size(2 + i);
		g.hp[i] = g.in[i] + 2 * g.p[i];
		if (g.in[i] <= 0 || g.hp[i] < span)
			return false;
		g.out[i] = (g.hp[i] - span) / g.s[i] + 1;
		if (transposed && g.out[i] != input.size(2 + i))
			return false;
	}
	return g.n > 0 && g.c > 0 && g.o > 0;
}

// x [n, c, in...] -> columns [n, G, c/G * K, L] (a copy of strided windows of the
// zero-padded x).
Tensor im2col(const Tensor &x, const ConvGeom &g)
{
	Tensor padded = x.contiguous();
	if (g.padded()) {
		padded = at::empty(g.shape(g.c, g.hp), x.options());
		fill_cmd(padded, 0);
		Tensor inner = padded;
		for (int i = 0; i < g.nd; ++i)
			inner = inner.narrow(2 + i, g.p[i], g.in[i]);
		inner.copy_(x);
	}
	std::vector<int64_t> sizes{g.n, g.c}, strides{g.c * g.P(), g.P()};
	for (int i = 0; i < g.nd; ++i)
		sizes.push_back(g.k[i]), strides.push_back(g.d[i] * g.sp(i));
	for (int i = 0; i < g.nd; ++i)
		sizes.push_back(g.out[i]), strides.push_back(g.s[i] * g.sp(i));
	Tensor cols = at::empty(sizes, x.options());
	copy_cast_into(cols, padded.as_strided(sizes, strides, padded.storage_offset()));
	return cols.view({g.n, g.g, g.c / g.g * g.K(), g.L()});
}

// columns [n, G, c/G * K, L] (contiguous) -> [n, c, in...]: each window element
// added back where im2col took it, one accumulate per kernel tap (within one tap
// the windows never repeat an element).
Tensor col2im(const Tensor &cols, const ConvGeom &g)
{
	std::vector<int64_t> cshape{g.n, g.c};
	cshape.insert(cshape.end(), g.k, g.k + g.nd);
	cshape.insert(cshape.end(), g.out, g.out + g.nd);
	Tensor gc = cols.view(cshape);
	Tensor gp = at::empty(g.shape(g.c, g.hp), cols.options());
	fill_cmd(gp, 0);
	std::vector<int64_t> dsizes{g.n, g.c}, dstrides{g.c * g.P(), g.P()};
	for (int i = 0; i < g.nd; ++i)
		dsizes.push_back(g.out[i]), dstrides.push_back(g.s[i] * g.sp(i));
	int64_t tap[3] = {0, 0, 0};
	for (int64_t t = 0; t < g.K(); ++t) {
		int64_t off = 0;
		Tensor src = gc;
		for (int i = 0; i < g.nd; ++i) {
			off += tap[i] * g.d[i] * g.sp(i);
			src = src.select(2, tap[i]);
		}
		Tensor dst = gp.as_strided(dsizes, dstrides, gp.storage_offset() + off);
		binary_op(NEURON_OP_ADD, dst, dst, src);
		for (int i = g.nd - 1; i >= 0; --i) {
			if (++tap[i] < g.k[i])
				break;
			tap[i] = 0;
		}
	}
	if (!g.padded())
		return gp;
	Tensor inner = gp;
	for (int i = 0; i < g.nd; ++i)
		inner = inner.narrow(2 + i, g.p[i], g.in[i]);
	return inner.contiguous();
}

void matmul_cmd(const Tensor &c, const Tensor &a, const Tensor &b)
{
	if (c.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_MATMUL, 3);
	cmd.operands[0] = desc(c);
	cmd.operands[1] = desc(a);
	cmd.operands[2] = desc(b);
	cmd.fscalars.f[0] = 1.0;
	submit(c, cmd);
}

// c[n, g] = a[n, g] @ b[n, g] over [N, G, M, K] x [N, G, K, L] views (a or b may be
// broadcast along N with stride 0). The chip's matmul has one batch dim, so this is
// one command for G == 1, else one per sample or one per group, whichever is fewer.
void grouped_matmul(const Tensor &c, const Tensor &a, const Tensor &b)
{
	const int64_t N = c.size(0), G = c.size(1);
	if (G == 1) {
		matmul_cmd(c.select(1, 0), a.select(1, 0), b.select(1, 0));
	} else if (N <= G) {
		for (int64_t i = 0; i < N; ++i)
			matmul_cmd(c.select(0, i), a.select(0, i), b.select(0, i));
	} else {
		for (int64_t i = 0; i < G; ++i)
			matmul_cmd(c.select(1, i), a.select(1, i), b.select(1, i));
	}
}

// The weight as [n (stride 0), G, o/G, c/G * K] (its natural layout for both directions).
Tensor weight_groups(const Tensor &weight, const ConvGeom &g)
{
	return weight.contiguous().view({1, g.g, g.o / g.g, g.c / g.g * g.K()}).expand({g.n, g.g, g.o / g.g, g.c / g.g * g.K()});
}

void add_bias(const Tensor &out, int64_t ch, const std::optional<Tensor> &bias)
{
	if (bias && bias->defined())
		binary_op(NEURON_OP_ADD, out, out, bias->view({1, ch, 1}));
}

Tensor conv_ovr(const Tensor &input, const Tensor &weight, const std::optional<Tensor> &bias, c10::IntArrayRef stride,
		c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
		int64_t groups)
{
	ConvGeom g;
	if (conv_geom(input, weight, stride, padding, dilation, transposed, output_padding, groups, g) &&
	    (!bias || !bias->defined() || float_dev(*bias))) {
		NEURON_NATIVE("convolution");
		const int64_t G = g.g, cgk = g.c / G * g.K(), L = g.L();
		if (!transposed) {
			Tensor out = at::empty({g.n, G, g.o / G, L}, input.options());
			grouped_matmul(out, weight_groups(weight, g), im2col(input, g));
			add_bias(out.view({g.n, g.o, L}), g.o, bias);
			return out.view(g.shape(g.o, g.out));
		}
		// transposed: columns = W^T @ x, then folded back onto the output
		Tensor cols = at::empty({g.n, G, cgk, L}, input.options());
		grouped_matmul(cols, weight_groups(weight, g).transpose(2, 3), input.contiguous().view({g.n, G, g.o / G, L}));
		Tensor out = col2im(cols, g);
		int64_t in_total = 1;
		for (int i = 0; i < g.nd; ++i)
			in_total *= g.in[i];
		add_bias(out.view({g.n, g.c, in_total}), g.c, bias);
		return out;
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
	ConvGeom g;
	if (conv_geom(input, weight, stride, padding, dilation, transposed, output_padding, groups, g) && float_dev(grad)) {
		NEURON_NATIVE("convolution_backward");
		const int64_t G = g.g, og = g.o / G, cgk = g.c / G * g.K(), L = g.L();
		// The column side is the input of a convolution and the output (grad) of a
		// transposed one; the other side is [n, G, o/G, L].
		const Tensor &col_side = transposed ? grad : input;
		Tensor other = (transposed ? input : grad).contiguous().view({g.n, G, og, L});
		Tensor gi, gw, gb;
		Tensor cols = (mask[1] || (transposed && mask[0])) ? im2col(col_side, g) : Tensor();
		if (mask[1]) { // dW[g] = sum_n other[n, g] @ cols[n, g]^T
			Tensor per = at::empty({g.n, G, og, cgk}, grad.options());
			grouped_matmul(per, other, cols.transpose(2, 3));
			gw = at::empty({1, G, og, cgk}, grad.options());
			reduce_cmd(NEURON_OP_SUM, gw, per, 1);
			gw = gw.view(weight.sizes());
		}
		if (mask[2]) {
			const int64_t ch = transposed ? g.c : g.o;
			gb = at::empty({1, ch, 1}, grad.options());
			reduce_cmd(NEURON_OP_SUM, gb, grad.contiguous().view({g.n, ch, -1}), 0x5);
			gb = gb.view({ch});
		}
		if (mask[0]) {
			if (!transposed) { // dX = col2im(W^T @ dY)
				Tensor gcols = at::empty({g.n, G, cgk, L}, grad.options());
				grouped_matmul(gcols, weight_groups(weight, g).transpose(2, 3), other);
				gi = col2im(gcols, g);
			} else { // dX = conv(dY, W)
				gi = at::empty({g.n, G, og, L}, grad.options());
				grouped_matmul(gi, weight_groups(weight, g), cols);
				gi = gi.view(input.sizes());
			}
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

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("convolution_overrideable", &conv_ovr);
	m.impl("convolution_backward_overrideable", &conv_bwd_ovr);
}

} // namespace torch_neuron
