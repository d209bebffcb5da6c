// Max and average pooling over 1-3 spatial dims (+ backward; ceil_mode, padding
// counted or not, divisor_override, dilation), over strided window views: the
// (padded) input seen as [N, C, O..., K...] and reduced over the K dims. The
// tables that depend only on the geometry (each tap's input position, each
// window's divisor) are made on the host once per geometry and kept on the device.
// 1-d pooling reaches the 2-d kernels through PyTorch's own unsqueeze.
#include "cmds.h"
#include "pool_common.h"

#include <ATen/Functions.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

// [N, C, O..., K...] window view of x padded with `pad_value`.
Tensor pool_windows(const Tensor &x, const PoolGeom &g, double pad_value)
{
	Tensor padded = x.contiguous();
	bool pads = false;
	for (int i = 0; i < g.nd; ++i)
		pads = pads || g.padded[i] != g.in[i];
	if (pads) {
		std::vector<int64_t> shape{g.n, g.c};
		shape.insert(shape.end(), g.padded, g.padded + g.nd);
		padded = at::empty(shape, x.options());
		fill_cmd(padded, pad_value);
		Tensor inner = padded;
		for (int i = 0; i < g.nd; ++i)
			inner = inner.narrow(2 + i, g.p[i], g.in[i]);
		inner.copy_(x);
	}
	std::vector<int64_t> sizes{g.n, g.c}, strides{padded.stride(0), padded.stride(1)};
	for (int i = 0; i < g.nd; ++i)
		sizes.push_back(g.out[i]), strides.push_back(g.s[i] * padded.stride(2 + i));
	for (int i = 0; i < g.nd; ++i)
		sizes.push_back(g.k[i]), strides.push_back(g.d[i] * padded.stride(2 + i));
	return padded.as_strided(sizes, strides);
}

int64_t window_mask(const PoolGeom &g)
{
	int64_t m = 0;
	for (int i = 0; i < g.nd; ++i)
		m |= int64_t{1} << (2 + g.nd + i);
	return m;
}

std::vector<int64_t> out_shape(const PoolGeom &g, bool keep_taps)
{
	std::vector<int64_t> s{g.n, g.c};
	s.insert(s.end(), g.out, g.out + g.nd);
	if (keep_taps)
		s.insert(s.end(), static_cast<size_t>(g.nd), 1);
	return s;
}

// For each output position and tap, minus the flat input index it reads (a large
// negative number for padding), so that an AMAX over the taps that hold the
// window's maximum picks the first one, as PyTorch does.
Tensor tap_positions(const Tensor &like, const PoolGeom &g)
{
	return cached_table("taps/" + g.key(), like, [&] {
		std::vector<int64_t> shape(g.out, g.out + g.nd);
		shape.insert(shape.end(), g.k, g.k + g.nd);
		Tensor pos = at::empty(shape, at::TensorOptions().dtype(c10::kLong));
		int64_t *p = pos.data_ptr<int64_t>();
		const int64_t n = pos.numel();
		for (int64_t flat = 0; flat < n; ++flat) {
			int64_t rem = flat, o[3] = {}, t[3] = {};
			for (int i = g.nd - 1; i >= 0; --i)
				t[i] = rem % g.k[i], rem /= g.k[i];
			for (int i = g.nd - 1; i >= 0; --i)
				o[i] = rem % g.out[i], rem /= g.out[i];
			int64_t index = 0;
			bool inside = true;
			for (int i = 0; i < g.nd; ++i) {
				const int64_t at_ = o[i] * g.s[i] + t[i] * g.d[i] - g.p[i];
				inside = inside && at_ >= 0 && at_ < g.in[i];
				index = index * g.in[i] + at_;
			}
			p[flat] = inside ? -index : -(int64_t{1} << 40);
		}
		return pos;
	});
}

std::tuple<Tensor, Tensor> max_pool_nd(const Tensor &x, const PoolGeom &g)
{
	Tensor win = pool_windows(x, g, -INFINITY);
	const int64_t taps = window_mask(g);
	Tensor out = at::empty(out_shape(g, true), x.options());
	reduce_cmd(NEURON_OP_AMAX, out, win, taps);
	Tensor hit = at::empty(win.sizes(), x.options().dtype(c10::kBool));
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COMPARE, 3);
	cmd.operands[0] = desc(hit);
	cmd.operands[1] = desc(win);
	cmd.operands[2] = desc_as(out, hit.sizes());
	cmd.iscalars[0] = NEURON_CMP_EQ;
	submit(hit, cmd);
	const Tensor pos = tap_positions(x, g);
	Tensor lowest = at::empty({}, pos.options());
	fill_cmd(lowest, -(int64_t{1} << 50));
	Tensor cand = at::empty(hit.sizes(), pos.options());
	where_cmd(cand, hit, pos, lowest);
	Tensor idx = at::empty(out_shape(g, true), pos.options());
	reduce_cmd(NEURON_OP_AMAX, idx, cand, taps);
	scalar_op(NEURON_OP_MUL_SCALAR, idx, idx, -1);
	return {out.view(out_shape(g, false)), idx.view(out_shape(g, false))};
}

template <int ND>
std::tuple<Tensor, Tensor> max_pool_idx(const Tensor &x_in, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
					c10::IntArrayRef d, bool ceil_mode)
{
	PoolGeom g;
	const Tensor x = batched(x_in, ND);
	if (!float_dev(x) || !pool_geom(x, ND, k, s, p, d, ceil_mode, g)) {
		note_fallback(ND == 2 ? "aten::max_pool2d_with_indices" : "aten::max_pool3d_with_indices");
		auto [o, i] = ND == 2 ? at::max_pool2d_with_indices(x_in.cpu(), k, s, p, d, ceil_mode)
				      : at::max_pool3d_with_indices(x_in.cpu(), k, s, p, d, ceil_mode);
		return {o.to(x_in.device()), i.to(x_in.device())};
	}
	NEURON_NATIVE(ND == 2 ? "max_pool2d_with_indices" : "max_pool3d_with_indices");
	auto [o, i] = max_pool_nd(x, g);
	return {unbatched_like(o, x_in, ND), unbatched_like(i, x_in, ND)};
}

template <int ND>
Tensor max_pool_idx_bwd(const Tensor &grad, const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
			c10::IntArrayRef d, bool ceil_mode, const Tensor &indices)
{
	if ((x.dim() != ND + 1 && x.dim() != ND + 2) || !float_dev(grad) || !index_ok(indices)) {
		note_fallback(ND == 2 ? "aten::max_pool2d_with_indices_backward" : "aten::max_pool3d_with_indices_backward");
		return (ND == 2 ? at::max_pool2d_with_indices_backward(grad.cpu(), x.cpu(), k, s, p, d, ceil_mode, indices.cpu())
				: at::max_pool3d_with_indices_backward(grad.cpu(), x.cpu(), k, s, p, d, ceil_mode, indices.cpu()))
			.to(x.device());
	}
	NEURON_NATIVE(ND == 2 ? "max_pool2d_with_indices_backward" : "max_pool3d_with_indices_backward");
	return scatter_max_grad(grad, x, indices, ND);
}

// ---- average pooling ----

// The divisor of each output position as PyTorch computes it: the window clipped
// to input + padding (count_include_pad) or to the input alone, unless
// divisor_override. A scalar when it is the same everywhere, else a table [O...].
struct AvgDivisor {
	double scalar = 0; // used when > 0
	Tensor map;
};

AvgDivisor avg_divisor(const Tensor &x, const PoolGeom &g, bool count_include_pad, std::optional<int64_t> div)
{
	if (div) {
		TORCH_CHECK(*div != 0, "divisor must be not zero");
		return {static_cast<double>(*div), {}};
	}
	int64_t count = 1;
	for (int i = 0; i < g.nd; ++i)
		count *= g.out[i];
	std::vector<float> d(static_cast<size_t>(count));
	for (int64_t flat = 0; flat < count; ++flat) {
		int64_t rem = flat;
		double pool = 1, inside = 1;
		for (int i = g.nd - 1; i >= 0; --i) {
			const int64_t o = rem % g.out[i];
			rem /= g.out[i];
			const int64_t lo = o * g.s[i] - g.p[i], hi = std::min(lo + g.k[i], g.in[i] + g.p[i]);
			pool *= static_cast<double>(hi - lo);
			inside *= static_cast<double>(std::min(hi, g.in[i]) - std::max<int64_t>(lo, 0));
		}
		d[static_cast<size_t>(flat)] = static_cast<float>(count_include_pad ? pool : inside);
	}
	if (std::all_of(d.begin(), d.end(), [&](float v) { return v == d[0]; }))
		return {static_cast<double>(d[0]), {}};
	std::vector<int64_t> shape(g.out, g.out + g.nd);
	Tensor map = cached_table("avgdiv/" + g.key() + (count_include_pad ? "/pad" : "/nopad"), x, [&] {
		return at::from_blob(d.data(), shape, at::TensorOptions().dtype(c10::kFloat)).clone();
	});
	return {0, map.to(x.scalar_type())};
}

void divide(const Tensor &out, const Tensor &in, const AvgDivisor &div)
{
	if (div.scalar > 0)
		scalar_op(NEURON_OP_DIV_SCALAR, out, in, div.scalar);
	else
		binary_op(NEURON_OP_DIV, out, in, div.map);
}

template <int ND>
Tensor avg_pool_f(const Tensor &x_in, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, bool ceil_mode,
		  bool count_include_pad, std::optional<int64_t> div)
{
	PoolGeom g;
	const Tensor x = batched(x_in, ND);
	if (!float_dev(x) || !pool_geom(x, ND, k, s, p, {}, ceil_mode, g)) {
		note_fallback(ND == 2 ? "aten::avg_pool2d" : "aten::avg_pool3d");
		return (ND == 2 ? at::avg_pool2d(x_in.cpu(), k, s, p, ceil_mode, count_include_pad, div)
				: at::avg_pool3d(x_in.cpu(), k, s, p, ceil_mode, count_include_pad, div))
			.to(x_in.device());
	}
	NEURON_NATIVE(ND == 2 ? "avg_pool2d" : "avg_pool3d");
	const AvgDivisor d = avg_divisor(x, g, count_include_pad, div);
	Tensor win = pool_windows(x, g, 0.0);
	Tensor out = at::empty(out_shape(g, true), x.options());
	reduce_cmd(NEURON_OP_SUM, out, win, window_mask(g));
	Tensor r = out.view(out_shape(g, false));
	divide(r, r, d);
	return unbatched_like(r, x_in, ND);
}

template <int ND>
Tensor avg_pool_bwd(const Tensor &grad_in, const Tensor &x_in, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
		    bool ceil_mode, bool count_include_pad, std::optional<int64_t> div)
{
	PoolGeom g;
	const Tensor x = batched(x_in, ND), grad = batched(grad_in, ND);
	if (!float_dev(grad) || !float_dev(x) || !pool_geom(x, ND, k, s, p, {}, ceil_mode, g)) {
		note_fallback(ND == 2 ? "aten::avg_pool2d_backward" : "aten::avg_pool3d_backward");
		return (ND == 2 ? at::avg_pool2d_backward(grad_in.cpu(), x_in.cpu(), k, s, p, ceil_mode, count_include_pad, div)
				: at::avg_pool3d_backward(grad_in.cpu(), x_in.cpu(), k, s, p, ceil_mode, count_include_pad, div))
			.to(x_in.device());
	}
	NEURON_NATIVE(ND == 2 ? "avg_pool2d_backward" : "avg_pool3d_backward");
	Tensor gs = at::empty(grad.sizes(), grad.options());
	divide(gs, grad, avg_divisor(x, g, count_include_pad, div));
	std::vector<int64_t> pshape{g.n, g.c};
	pshape.insert(pshape.end(), g.padded, g.padded + g.nd);
	Tensor gp = at::empty(pshape, grad.options());
	fill_cmd(gp, 0);
	// One accumulate per kernel tap; what lands in the padding (or past it, for
	// ceil_mode's partial windows) is cut off below.
	std::vector<int64_t> osizes{g.n, g.c}, ostrides{gp.stride(0), gp.stride(1)};
	for (int i = 0; i < g.nd; ++i)
		osizes.push_back(g.out[i]), ostrides.push_back(g.s[i] * gp.stride(2 + i));
	int64_t taps = 1;
	for (int i = 0; i < g.nd; ++i)
		taps *= g.k[i];
	for (int64_t t = 0; t < taps; ++t) {
		int64_t rem = t, offset = 0;
		for (int i = g.nd - 1; i >= 0; --i) {
			offset += (rem % g.k[i]) * g.d[i] * gp.stride(2 + i);
			rem /= g.k[i];
		}
		Tensor dst = gp.as_strided(osizes, ostrides, gp.storage_offset() + offset);
		binary_op(NEURON_OP_ADD, dst, dst, gs);
	}
	Tensor r = gp;
	for (int i = 0; i < g.nd; ++i)
		r = r.narrow(2 + i, g.p[i], g.in[i]);
	return unbatched_like(r.contiguous(), x_in, ND);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("max_pool2d_with_indices", &max_pool_idx<2>);
	m.impl("max_pool2d_with_indices_backward", &max_pool_idx_bwd<2>);
	m.impl("max_pool3d_with_indices", &max_pool_idx<3>);
	m.impl("max_pool3d_with_indices_backward", &max_pool_idx_bwd<3>);
	m.impl("avg_pool2d", &avg_pool_f<2>);
	m.impl("avg_pool2d_backward", &avg_pool_bwd<2>);
	m.impl("avg_pool3d", &avg_pool_f<3>);
	m.impl("avg_pool3d_backward", &avg_pool_bwd<3>);
}

} // namespace torch_neuron
