// Layer norm (+ backward) over the last k dims: the chip's LAYER_NORM commands.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <optional>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- layer norm (normalized over the last k dims) ----
//
// One LAYER_NORM command forward and one LAYER_NORM_BACKWARD for dx (cmd.h, ISA
// 1.8): the normalized dims flattened into the chip's one row dim, the statistics
// f32 of x's shape with those dims of size 1 (what PyTorch's native_layer_norm
// returns). The weight and bias gradients are one LAYER_NORM_PARAM_GRAD.

// x as [outer..., N] (N: the normalized dims' product), a view when they are one run.
Tensor as_rows(const Tensor &x, int64_t k)
{
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - k);
	shape.push_back(c10::multiply_integers(x.sizes().end() - k, x.sizes().end()));
	return x.reshape(shape);
}

// The statistics' shape on the chip: x's outer dims and one of size 1.
std::vector<int64_t> stats_rows(const Tensor &x, int64_t k)
{
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - k);
	shape.push_back(1);
	return shape;
}

// An affine parameter as the row's 1-D vector (nullopt: none).
std::optional<Tensor> row_param(const std::optional<Tensor> &p, int64_t n, const char *what)
{
	if (!p || !p->defined())
		return std::nullopt;
	TORCH_CHECK(p->numel() == n, "native_layer_norm: ", what, " has ", p->numel(),
		    " elements but the normalized shape has ", n);
	return p->reshape({n});
}

void layer_norm_cmd(const Tensor &out, const Tensor &mean, const Tensor &rstd, const Tensor &x,
		    const std::optional<Tensor> &w, const std::optional<Tensor> &b, double eps)
{
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_LAYER_NORM, 4 + (w ? 1 : 0) + (b ? 1 : 0));
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(mean);
	cmd.operands[2] = desc(rstd);
	cmd.operands[3] = desc(x);
	if (w)
		cmd.operands[4] = desc(*w);
	if (b)
		cmd.operands[5] = desc(*b);
	cmd.iscalars[0] = x.dim() - 1;
	cmd.fscalars.f[0] = eps;
	submit(out, cmd);
}

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor &x_in, c10::IntArrayRef nshape, const std::optional<Tensor> &weight,
					      const std::optional<Tensor> &bias, double eps)
{
	NEURON_NATIVE("native_layer_norm");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x_in.dim();
	if (!float_dev(x_in) || nd == 0 || nd > NEURON_MAX_DIMS || k == 0 || k > nd || !(eps >= 0) ||
	    !std::isfinite(eps)) {
		note_fallback("native_layer_norm");
		auto [o, m, r] = at::native_layer_norm(x_in.cpu(), nshape, cpu_opt(weight), cpu_opt(bias), eps);
		return {o.to(x_in.device()), m.to(x_in.device()), r.to(x_in.device())};
	}
	const Tensor x = as_rows(x_in, k);
	const int64_t n = x.size(-1);
	std::optional<Tensor> w = row_param(weight, n, "weight"), b = row_param(bias, n, "bias");
	if (b && !w) { // the chip's bias follows a weight: a weight of ones
		w = at::empty({n}, b->options());
		fill_cmd(*w, 1);
	}
	int64_t inner = 0;
	for (int64_t i = nd - k; i < nd; ++i)
		inner |= int64_t{1} << i;
	const auto opts = x_in.options().dtype(c10::kFloat);
	Tensor out = at::empty(x.sizes(), x_in.options());
	Tensor mean = at::empty(stats_rows(x_in, k), opts), rstd = at::empty(stats_rows(x_in, k), opts);
	layer_norm_cmd(out, mean, rstd, x, w, b, eps);
	const auto ks = keep_shape(x_in, inner);
	return {out.view(x_in.sizes()), mean.view(ks), rstd.view(ks)};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor &go, const Tensor &x, c10::IntArrayRef nshape,
						       const Tensor &mean, const Tensor &rstd,
						       const std::optional<Tensor> &weight, const std::optional<Tensor> &bias,
						       std::array<bool, 3> mask3)
{
	NEURON_NATIVE("native_layer_norm_backward");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x.dim();
	if (!float_dev(go) || !float_dev(x) || nd == 0 || k == 0 || k > nd || !go.sizes().equals(x.sizes()) ||
	    mean.numel() * c10::multiply_integers(nshape) != x.numel()) {
		note_fallback("native_layer_norm_backward");
		auto [a, b, c] = at::native_layer_norm_backward(go.cpu(), x.cpu(), nshape, mean.cpu(), rstd.cpu(),
								 cpu_opt(weight), cpu_opt(bias), mask3);
		auto mv = [&](const Tensor &t) { return t.defined() ? t.to(x.device()) : t; };
		return {mv(a), mv(b), mv(c)};
	}
	// The chip's operands: rows of the normalized dims flattened, f32 statistics.
	const Tensor xr = as_rows(x, k), gr = as_rows(go.scalar_type() == x.scalar_type() ? go : go.to(x.scalar_type()), k);
	const int64_t n = xr.size(-1);
	auto stats = [&](const Tensor &s) { return s.to(c10::kFloat).reshape(stats_rows(x, k)); };
	const Tensor m = stats(mean), r = stats(rstd);
	Tensor dx, dw, db;
	if (mask3[0]) {
		const std::optional<Tensor> w = row_param(weight, n, "weight");
		Tensor dxr = at::empty(xr.sizes(), x.options());
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_LAYER_NORM_BACKWARD, w ? 6 : 5);
		cmd.operands[0] = desc(dxr);
		cmd.operands[1] = desc(gr);
		cmd.operands[2] = desc(xr);
		cmd.operands[3] = desc(m);
		cmd.operands[4] = desc(r);
		if (w)
			cmd.operands[5] = desc(*w);
		cmd.iscalars[0] = nd - k;
		submit(dxr, cmd);
		dx = dxr.view(x.sizes());
	}
	const bool want_dw = mask3[1] && weight && weight->defined(), want_db = mask3[2] && bias && bias->defined();
	if (want_dw || want_db) {
		// dw = sum over the rows of go * xhat, db = sum of go: one LAYER_NORM_PARAM_GRAD
		// (f32 sums, cast to the parameter's dtype).
		const auto f32 = go.options().dtype(c10::kFloat);
		Tensor w32 = at::empty({n}, f32), b32 = at::empty({n}, f32);
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_LAYER_NORM_PARAM_GRAD, 6);
		cmd.operands[0] = desc(w32);
		cmd.operands[1] = desc(b32);
		cmd.operands[2] = desc(gr);
		cmd.operands[3] = desc(xr);
		cmd.operands[4] = desc(m);
		cmd.operands[5] = desc(r);
		cmd.iscalars[0] = nd - k;
		submit(w32, cmd);
		const std::vector<int64_t> wshape(nshape.begin(), nshape.end());
		if (want_dw)
			dw = w32.view(wshape).to(weight->scalar_type());
		if (want_db)
			db = b32.view(wshape).to(bias->scalar_type());
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
