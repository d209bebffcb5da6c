// 2-d max and average pooling (+ backward; ceil_mode, padding counted or not,
// divisor_override) over strided window views.
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- 2-d pooling over strided window views of the (padded) input ----

struct PoolGeom {
	int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, hp, wp;
};

// Output length of one pooled dim, as PyTorch's pooling_output_shape: with ceil_mode
// a last, partial window counts if it starts inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t pad, int64_t span, int64_t stride, bool ceil_mode)
{
	const int64_t room = in + 2 * pad - span + (ceil_mode ? stride - 1 : 0);
	if (room < 0)
		return 0;
	int64_t out = room / stride + 1;
	if (ceil_mode && (out - 1) * stride >= in + pad)
		--out;
	return out;
}

bool pool_geom(const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, c10::IntArrayRef d,
	       bool ceil_mode, PoolGeom &g)
{
	if (x.dim() != 4 || !float_dev(x) || k.empty())
		return false;
	g.n = x.size(0), g.c = x.size(1), g.h = x.size(2), g.w = x.size(3);
	g.kh = k[0], g.kw = k.size() > 1 ? k[1] : k[0];
	g.sh = s.empty() ? g.kh : s[0], g.sw = s.empty() ? g.kw : (s.size() > 1 ? s[1] : s[0]);
	g.ph = p.empty() ? 0 : p[0], g.pw = p.empty() ? 0 : (p.size() > 1 ? p[1] : p[0]);
	g.dh = d.empty() ? 1 : d[0], g.dw = d.empty() ? 1 : (d.size() > 1 ? d[1] : d[0]);
	const int64_t span_h = g.dh * (g.kh - 1) + 1, span_w = g.dw * (g.kw - 1) + 1;
	g.oh = pooled_size(g.h, g.ph, span_h, g.sh, ceil_mode);
	g.ow = pooled_size(g.w, g.pw, span_w, g.sw, ceil_mode);
	// The padded extent: input and padding, plus (ceil_mode) what the last window
	// reaches past them (filled like the padding).
	g.hp = std::max(g.h + 2 * g.ph, (g.oh - 1) * g.sh + span_h);
	g.wp = std::max(g.w + 2 * g.pw, (g.ow - 1) * g.sw + span_w);
	return g.oh > 0 && g.ow > 0 && g.ph <= g.kh / 2 && g.pw <= g.kw / 2;
}

// [N, C, OH, OW, kh, kw] window view of x padded with `pad_value`.
Tensor pool_windows(const Tensor &x, const PoolGeom &g, double pad_value)
{
	Tensor padded = x.contiguous();
	if (g.hp != g.h || g.wp != g.w) {
		padded = at::empty({g.n, g.c, g.hp, g.wp}, x.options());
		fill_cmd(padded, pad_value);
		padded.narrow(2, g.ph, g.h).narrow(3, g.pw, g.w).copy_(x);
	}
	return padded.as_strided({g.n, g.c, g.oh, g.ow, g.kh, g.kw},
				 {g.c * g.hp * g.wp, g.hp * g.wp, g.sh * g.wp, g.sw, g.dh * g.wp, g.dw});
}

std::tuple<Tensor, Tensor> max_pool2d_idx(const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
					  c10::IntArrayRef d, bool ceil_mode)
{
	PoolGeom g;
	if (!pool_geom(x, k, s, p, d, ceil_mode, g)) {
		note_fallback("aten::max_pool2d_with_indices");
		auto [o, i] = at::max_pool2d_with_indices(x.cpu(), k, s, p, d, ceil_mode);
		return {o.to(x.device()), i.to(x.device())};
	}
	NEURON_NATIVE("max_pool2d_with_indices");
	Tensor win = pool_windows(x, g, -INFINITY);
	Tensor out = at::empty({g.n, g.c, g.oh, g.ow, 1, 1}, x.options());
	reduce_cmd(NEURON_OP_AMAX, out, win, 0x30);
	// The index of the first maximum: min over taps of where(v == max, flat index, big).
	Tensor hit = at::empty({g.n, g.c, g.oh, g.ow, g.kh, g.kw}, x.options().dtype(c10::kBool));
	{
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_COMPARE, 3);
		cmd.operands[0] = desc(hit);
		cmd.operands[1] = desc(win);
		cmd.operands[2] = desc_as(out, hit.sizes());
		cmd.iscalars[0] = NEURON_CMP_EQ;
		submit(hit, cmd);
	}
	Tensor pos = at::empty({g.oh, g.ow, g.kh, g.kw}, at::TensorOptions().dtype(c10::kLong));
	auto pa = pos.accessor<int64_t, 4>();
	for (int64_t a = 0; a < g.oh; ++a)
		for (int64_t b = 0; b < g.ow; ++b)
			for (int64_t i = 0; i < g.kh; ++i)
				for (int64_t j = 0; j < g.kw; ++j) {
					const int64_t r = a * g.sh + i * g.dh - g.ph, c = b * g.sw + j * g.dw - g.pw;
					// negated so that AMAX picks the smallest index
					pa[a][b][i][j] = (r < 0 || c < 0 || r >= g.h || c >= g.w) ? -(int64_t{1} << 40) : -(r * g.w + c);
				}
	Tensor posd = pos.to(x.device());
	Tensor lowest = at::empty({}, posd.options());
	fill_cmd(lowest, -(int64_t{1} << 50));
	Tensor cand = at::empty(hit.sizes(), posd.options());
	where_cmd(cand, hit, posd, lowest);
	Tensor idx = at::empty({g.n, g.c, g.oh, g.ow, 1, 1}, posd.options());
	reduce_cmd(NEURON_OP_AMAX, idx, cand, 0x30);
	scalar_op(NEURON_OP_MUL_SCALAR, idx, idx, -1);
	return {out.view({g.n, g.c, g.oh, g.ow}), idx.view({g.n, g.c, g.oh, g.ow})};
}

Tensor max_pool2d_idx_bwd(const Tensor &grad, const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s,
			  c10::IntArrayRef p, c10::IntArrayRef d, bool ceil_mode, const Tensor &indices)
{
	if (x.dim() != 4 || !float_dev(grad) || !index_ok(indices)) {
		note_fallback("aten::max_pool2d_with_indices_backward");
		return at::max_pool2d_with_indices_backward(grad.cpu(), x.cpu(), k, s, p, d, ceil_mode, indices.cpu())
			.to(x.device());
	}
	NEURON_NATIVE("max_pool2d_with_indices_backward");
	const int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
	Tensor gi = at::empty({n, c, hw}, grad.options());
	fill_cmd(gi, 0);
	scatter_add_cmd(gi, 2, indices.reshape({n, c, -1}), grad.reshape({n, c, -1}));
	return gi.view(x.sizes());
}

bool avg_ok(const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, bool ceil_mode, PoolGeom &g)
{
	return pool_geom(x, k, s, p, {}, ceil_mode, g);
}

// The divisor of each output position as PyTorch's avg_pool2d computes it: the
// window clipped to input + padding (count_include_pad) or to the input alone,
// unless divisor_override. A scalar when it is the same everywhere (the usual
// case), else an [OH, OW] tensor made on the host once per geometry and kept on
// the device (shapes repeat every step; an upload per call costs milliseconds).
struct AvgDivisor {
	double scalar = 0; // used when > 0
	Tensor map;        // [OH, OW], x's dtype, on x's device
};

AvgDivisor avg_divisor(const Tensor &x, const PoolGeom &g, bool count_include_pad, std::optional<int64_t> div)
{
	if (div) {
		TORCH_CHECK(*div != 0, "divisor must be not zero");
		return {static_cast<double>(*div), {}};
	}
	std::vector<float> d(static_cast<size_t>(g.oh * g.ow));
	bool uniform = true;
	for (int64_t i = 0; i < g.oh; ++i)
		for (int64_t j = 0; j < g.ow; ++j) {
			int64_t h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
			int64_t h1 = std::min(h0 + g.kh, g.h + g.ph), w1 = std::min(w0 + g.kw, g.w + g.pw);
			const int64_t pool = (h1 - h0) * (w1 - w0);
			h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
			h1 = std::min(h1, g.h), w1 = std::min(w1, g.w);
			d[static_cast<size_t>(i * g.ow + j)] = static_cast<float>(count_include_pad ? pool : (h1 - h0) * (w1 - w0));
			uniform = uniform && d[static_cast<size_t>(i * g.ow + j)] == d[0];
		}
	if (uniform)
		return {static_cast<double>(d[0]), {}};
	using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
			       bool, int, int>;
	static std::mutex mu;
	static auto *cache = new std::map<Key, Tensor>; // leaked: device tensors must not die at exit
	const Key key{g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, count_include_pad,
		      static_cast<int>(x.scalar_type()), x.device().index()};
	std::lock_guard lock(mu);
	if (auto it = cache->find(key); it != cache->end())
		return {0, it->second};
	if (cache->size() >= 64)
		cache->clear();
	Tensor map = at::from_blob(d.data(), {g.oh, g.ow}, at::TensorOptions().dtype(c10::kFloat)).to(x.device(), x.scalar_type());
	// The map may be used from any stream later: let its upload finish first.
	sync_stream(current_queues(x.device().index()));
	cache->emplace(key, map);
	return {0, map};
}

void divide(const Tensor &out, const Tensor &in, const AvgDivisor &div)
{
	if (div.scalar > 0)
		scalar_op(NEURON_OP_DIV_SCALAR, out, in, div.scalar);
	else
		binary_op(NEURON_OP_DIV, out, in, div.map);
}

Tensor avg_pool2d_f(const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p, bool ceil_mode,
		  bool count_include_pad, std::optional<int64_t> div)
{
	if (x.dim() == 3) // unbatched [C, H, W]
		return avg_pool2d_f(x.unsqueeze(0), k, s, p, ceil_mode, count_include_pad, div).squeeze(0);
	PoolGeom g;
	if (!avg_ok(x, k, s, p, ceil_mode, g)) {
		note_fallback("aten::avg_pool2d");
		return at::avg_pool2d(x.cpu(), k, s, p, ceil_mode, count_include_pad, div).to(x.device());
	}
	NEURON_NATIVE("avg_pool2d");
	const AvgDivisor d = avg_divisor(x, g, count_include_pad, div);
	Tensor win = pool_windows(x, g, 0.0);
	Tensor out = at::empty({g.n, g.c, g.oh, g.ow, 1, 1}, x.options());
	reduce_cmd(NEURON_OP_SUM, out, win, 0x30);
	Tensor r = out.view({g.n, g.c, g.oh, g.ow});
	divide(r, r, d);
	return r;
}

Tensor avg_pool2d_bwd(const Tensor &grad, const Tensor &x, c10::IntArrayRef k, c10::IntArrayRef s, c10::IntArrayRef p,
		      bool ceil_mode, bool count_include_pad, std::optional<int64_t> div)
{
	if (x.dim() == 3 && grad.dim() == 3)
		return avg_pool2d_bwd(grad.unsqueeze(0), x.unsqueeze(0), k, s, p, ceil_mode, count_include_pad, div).squeeze(0);
	PoolGeom g;
	if (!avg_ok(x, k, s, p, ceil_mode, g) || !float_dev(grad)) {
		note_fallback("aten::avg_pool2d_backward");
		return at::avg_pool2d_backward(grad.cpu(), x.cpu(), k, s, p, ceil_mode, count_include_pad, div).to(x.device());
	}
	NEURON_NATIVE("avg_pool2d_backward");
	Tensor gs = at::empty(grad.sizes(), grad.options());
	divide(gs, grad, avg_divisor(x, g, count_include_pad, div));
	Tensor gp = at::empty({g.n, g.c, g.hp, g.wp}, grad.options());
	fill_cmd(gp, 0);
	// One accumulate per kernel tap; what lands in the padding (or past it, for
	// ceil_mode's partial windows) is cut off below.
	for (int64_t i = 0; i < g.kh; ++i)
		for (int64_t j = 0; j < g.kw; ++j) {
			Tensor dst = gp.as_strided({g.n, g.c, g.oh, g.ow}, {g.c * g.hp * g.wp, g.hp * g.wp, g.sh * g.wp, g.sw},
						   gp.storage_offset() + i * g.dh * g.wp + j * g.dw);
			binary_op(NEURON_OP_ADD, dst, dst, gs);
		}
	return (g.hp != g.h || g.wp != g.w) ? gp.narrow(2, g.ph, g.h).narrow(3, g.pw, g.w).contiguous() : gp;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("max_pool2d_with_indices", &max_pool2d_idx);
	m.impl("max_pool2d_with_indices_backward", &max_pool2d_idx_bwd);
	m.impl("avg_pool2d", &avg_pool2d_f);
	m.impl("avg_pool2d_backward", &avg_pool2d_bwd);
}

} // namespace torch_neuron
