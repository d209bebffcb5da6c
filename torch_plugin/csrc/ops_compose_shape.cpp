// Data movement composed of native ops: reflection / replication padding (one
// INDEX_SELECT per padded dim with an index kept on the device; backward by
// INDEX_ADD), max_unpool (a scatter of the pooled values), im2col / col2im
// (window views; the sum of overlapping windows tap by tap), linalg_cross (rolled
// views), addbmm (one matmul over the batch folded into K), and group norm
// (statistics per group, + backward) as PyTorch's CPU kernels define them.
#include "compose.h"
#include "pool_common.h"

#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// ---- reflection / replication padding ----

// The source index of each padded position along one dim.
Tensor pad_index(const Tensor &like, int64_t in, int64_t lo, int64_t hi, bool reflect)
{
	const std::string key = std::string(reflect ? "reflect/" : "replicate/") + std::to_string(in) + "," +
				std::to_string(lo) + "," + std::to_string(hi);
	return cached_table(key, like, [&] {
		const int64_t n = in + lo + hi;
		Tensor ix = at::empty({n}, at::TensorOptions().dtype(c10::kLong));
		int64_t *p = ix.data_ptr<int64_t>();
		for (int64_t o = 0; o < n; ++o) {
			int64_t i = o - lo;
			if (reflect) {
				const int64_t period = 2 * (in - 1);
				i = period ? std::abs(i) % period : 0;
				i = i >= in ? period - i : i;
			} else {
				i = std::clamp<int64_t>(i, 0, in - 1);
			}
			p[o] = i;
		}
		return ix;
	});
}

// pad: (left, right) pairs from the last dim backwards, as F.pad.
Tensor pad_nd(const char *name, bool reflect, int nd, const Tensor &x, c10::IntArrayRef pad)
{
	TORCH_CHECK(static_cast<int>(pad.size()) == 2 * nd, name, ": expected ", 2 * nd, " padding values");
	Tensor r = x;
	for (int i = 0; i < nd; ++i) {
		const int64_t d = x.dim() - 1 - i, lo = pad[2 * i], hi = pad[2 * i + 1], in = x.size(d);
		if (reflect)
			TORCH_CHECK(lo < in && hi < in, name, ": padding size should be less than the corresponding input dimension, "
							      "but got: padding (", lo, ", ", hi, ") at dimension ", d,
				    " of input ", x.sizes());
		if (lo == 0 && hi == 0)
			continue;
		TORCH_CHECK(lo >= 0 && hi >= 0, name, ": negative padding is not supported on neuron");
		r = at::index_select(r, d, pad_index(x, in, lo, hi, reflect));
	}
	return r.is_same(x) ? x.clone() : r;
}

Tensor pad_nd_backward(const Tensor &g, const Tensor &x, c10::IntArrayRef pad, bool reflect, int nd)
{
	Tensor r = g;
	for (int i = nd - 1; i >= 0; --i) {
		const int64_t d = x.dim() - 1 - i, lo = pad[2 * i], hi = pad[2 * i + 1], in = x.size(d);
		if (lo == 0 && hi == 0)
			continue;
		std::vector<int64_t> shape(r.sizes().begin(), r.sizes().end());
		shape[static_cast<size_t>(d)] = in;
		r = at::zeros(shape, r.options()).index_add_(d, pad_index(x, in, lo, hi, reflect), r);
	}
	return r;
}

// An empty input padded: only the shape changes.
Tensor empty_padded(const Tensor &x, c10::IntArrayRef pad, int nd)
{
	std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
	for (int i = 0; i < nd; ++i)
		shape[shape.size() - 1 - static_cast<size_t>(i)] += pad[2 * i] + pad[2 * i + 1];
	return at::empty(shape, x.options());
}

bool pad_negative(c10::IntArrayRef pad)
{
	return std::any_of(pad.begin(), pad.end(), [](int64_t p) { return p < 0; });
}

#define PAD_OP(name, REFLECT, ND)                                                                                     \
	Tensor name(const Tensor &x, c10::SymIntArrayRef pad_s)                                                        \
	{                                                                                                           \
		const c10::IntArrayRef pad = C10_AS_INTARRAYREF_SLOW(pad_s);                                        \
		if (!all_on_device({&x}) || pad_negative(pad)) {                                                    \
			note_fallback(#name);                                                                       \
			return to_dev(at::name(x.cpu(), pad), x);                                                   \
		}                                                                                                   \
		NEURON_NATIVE(#name);                                                                               \
		if (x.numel() == 0)                                                                                 \
			return empty_padded(x, pad, ND);                                                            \
		return pad_nd(#name, REFLECT, ND, x, pad);                                                          \
	}                                                                                                           \
	Tensor name##_backward(const Tensor &g, const Tensor &x, c10::SymIntArrayRef pad_s)                        \
	{                                                                                                           \
		const c10::IntArrayRef pad = C10_AS_INTARRAYREF_SLOW(pad_s);                                        \
		if (!floats_on_device({&g, &x}) || pad_negative(pad)) {                                             \
			note_fallback(#name "_backward");                                                           \
			return to_dev(at::name##_backward(g.cpu(), x.cpu(), pad), x);                               \
		}                                                                                                   \
		NEURON_NATIVE(#name "_backward");                                                                   \
		return pad_nd_backward(g, x, pad, REFLECT, ND);                                                     \
	}

PAD_OP(reflection_pad1d, true, 1)
PAD_OP(reflection_pad2d, true, 2)
PAD_OP(reflection_pad3d, true, 3)
PAD_OP(replication_pad1d, false, 1)
PAD_OP(replication_pad2d, false, 2)
PAD_OP(replication_pad3d, false, 3)

// ---- max_unpool: the values written at their flat spatial indices ----

Tensor unpool(const char *name, const Tensor &x, const Tensor &indices, c10::IntArrayRef out_size, int nd)
{
	const Tensor xb = batched(x, nd), ib = batched(indices, nd);
	const int64_t n = xb.size(0), c = xb.size(1);
	int64_t plane = 1;
	for (int64_t s : out_size)
		plane *= s;
	Tensor out = at::zeros({n, c, plane}, x.options());
	if (x.numel())
		out.scatter_(2, ib.reshape({n, c, -1}), xb.reshape({n, c, -1}));
	std::vector<int64_t> shape{n, c};
	shape.insert(shape.end(), out_size.begin(), out_size.end());
	return unbatched_like(out.view(shape), x, nd);
}
Tensor max_unpool2d_dev(const Tensor &x, const Tensor &indices, c10::SymIntArrayRef out_s)
{
	const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s);
	if (!all_on_device({&x, &indices}) || indices.scalar_type() != c10::kLong || out.size() != 2 ||
	    x.sizes() != indices.sizes())
		return note_fallback("max_unpool2d"), to_dev(at::max_unpool2d(x.cpu(), indices.cpu(), out), x);
	NEURON_NATIVE("max_unpool2d");
	return unpool("max_unpool2d", x, indices, out, 2);
}
Tensor max_unpool3d_dev(const Tensor &x, const Tensor &indices, c10::SymIntArrayRef out_s, c10::IntArrayRef stride,
		    c10::IntArrayRef padding)
{
	const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s);
	if (!all_on_device({&x, &indices}) || indices.scalar_type() != c10::kLong || out.size() != 3 ||
	    x.sizes() != indices.sizes())
		return note_fallback("max_unpool3d"), to_dev(at::max_unpool3d(x.cpu(), indices.cpu(), out, stride, padding), x);
	NEURON_NATIVE("max_unpool3d");
	return unpool("max_unpool3d", x, indices, out, 3);
}

// ---- im2col / col2im (F.unfold / F.fold) ----

struct Unfold {
	int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Tensor im2col_dev(const Tensor &x_in, c10::IntArrayRef k, c10::IntArrayRef d, c10::IntArrayRef p, c10::IntArrayRef s)
{
	if (!all_on_device({&x_in}) || (x_in.dim() != 3 && x_in.dim() != 4))
		return note_fallback("im2col"), to_dev(at::im2col(x_in.cpu(), k, d, p, s), x_in);
	NEURON_NATIVE("im2col");
	const Tensor x = batched(x_in, 2);
	const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
	const Unfold u{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
	const int64_t oh = (h + 2 * u.ph - (u.dh * (u.kh - 1) + 1)) / u.sh + 1;
	const int64_t ow = (w + 2 * u.pw - (u.dw * (u.kw - 1) + 1)) / u.sw + 1;
	TORCH_CHECK(oh > 0 && ow > 0, "im2col: the kernel does not fit the padded input");
	Tensor padded = at::constant_pad_nd(x, {u.pw, u.pw, u.ph, u.ph}, 0);
	const int64_t H = padded.size(2), W = padded.size(3);
	// [N, C, kh, kw, OH, OW] window view of the padded input
	Tensor win = padded.as_strided({n, c, u.kh, u.kw, oh, ow},
				       {c * H * W, H * W, u.dh * W, u.dw, u.sh * W, u.sw});
	Tensor cols = win.reshape({n, c * u.kh * u.kw, oh * ow});
	return x_in.dim() == 3 ? cols.squeeze(0) : cols;
}

Tensor col2im_dev(const Tensor &cols_in, c10::SymIntArrayRef out_s, c10::IntArrayRef k, c10::IntArrayRef d,
	      c10::IntArrayRef p, c10::IntArrayRef s)
{
	const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s);
	if (!floats_on_device({&cols_in}) || (cols_in.dim() != 2 && cols_in.dim() != 3))
		return note_fallback("col2im"), to_dev(at::col2im(cols_in.cpu(), out, k, d, p, s), cols_in);
	NEURON_NATIVE("col2im");
	const Tensor cols = cols_in.dim() == 2 ? cols_in.unsqueeze(0) : cols_in;
	const Unfold u{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
	const int64_t n = cols.size(0), c = cols.size(1) / (u.kh * u.kw), h = out[0], w = out[1];
	const int64_t oh = (h + 2 * u.ph - (u.dh * (u.kh - 1) + 1)) / u.sh + 1;
	const int64_t ow = (w + 2 * u.pw - (u.dw * (u.kw - 1) + 1)) / u.sw + 1;
	TORCH_CHECK(cols.size(1) == c * u.kh * u.kw && cols.size(2) == oh * ow, "col2im: input of shape ", cols_in.sizes(),
		    " does not match the output size and kernel");
	const int64_t H = h + 2 * u.ph, W = w + 2 * u.pw;
	Tensor img = at::zeros({n, c, H, W}, cols.options());
	const Tensor taps = cols.view({n, c, u.kh, u.kw, oh, ow});
	for (int64_t i = 0; i < u.kh; ++i)
		for (int64_t j = 0; j < u.kw; ++j) {
			Tensor dst = img.as_strided({n, c, oh, ow}, {c * H * W, H * W, u.sh * W, u.sw},
						    img.storage_offset() + i * u.dh * W + j * u.dw);
			dst.add_(taps.select(2, i).select(2, j));
		}
	Tensor r = img.narrow(2, u.ph, h).narrow(3, u.pw, w).contiguous();
	return cols_in.dim() == 2 ? r.squeeze(0) : r;
}

// ---- linalg_cross: a[i+1] b[i+2] - a[i+2] b[i+1] along a dim of size 3 ----

Tensor &linalg_cross_o(const Tensor &a, const Tensor &b, int64_t dim, Tensor &out)
{
	NEURON_NATIVE("linalg_cross");
	if (!all_on_device({&a, &b}) || a.scalar_type() == c10::kBool)
		return note_fallback("linalg_cross"), assign_out(out, at::linalg_cross(a.cpu(), b.cpu(), dim));
	const auto shape = at::infer_size(a.sizes(), b.sizes());
	const int64_t d = c10::maybe_wrap_dim(dim, static_cast<int64_t>(shape.size()));
	TORCH_CHECK(a.size(d) == 3 && b.size(d) == 3, "linalg.cross: inputs dimension ", dim, " must have length 3. Got ",
		    a.size(d), " and ", b.size(d));
	const Tensor ae = a.expand(shape), be = b.expand(shape);
	const Tensor a1 = at::roll(ae, -1, d), a2 = at::roll(ae, -2, d), b1 = at::roll(be, -1, d), b2 = at::roll(be, -2, d);
	return assign_out(out, a1 * b2 - a2 * b1);
}
Tensor linalg_cross_dev(const Tensor &a, const Tensor &b, int64_t dim)
{
	Tensor out = at::empty({0}, a.options().dtype(at::result_type(a, b)));
	return linalg_cross_o(a, b, dim, out);
}

// ---- addbmm: beta self + alpha sum_b b1[b] @ b2[b], the batch folded into K ----

Tensor &addbmm_o(const Tensor &self, const Tensor &b1, const Tensor &b2, const Scalar &beta, const Scalar &alpha, Tensor &out)
{
	NEURON_NATIVE("addbmm");
	if (!floats_on_device({&self, &b1, &b2}) || b1.dim() != 3 || b2.dim() != 3)
		return note_fallback("addbmm"), assign_out(out, at::addbmm(self.cpu(), b1.cpu(), b2.cpu(), beta, alpha));
	TORCH_CHECK(b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1), "addbmm: batch1 and batch2 shapes cannot be multiplied (",
		    b1.sizes(), " and ", b2.sizes(), ")");
	const Tensor a = b1.transpose(0, 1).reshape({b1.size(1), -1});
	const Tensor b = b2.reshape({-1, b2.size(2)});
	return assign_out(out, at::addmm(self.expand({b1.size(1), b2.size(2)}), a, b, beta, alpha));
}
Tensor addbmm_dev(const Tensor &self, const Tensor &b1, const Tensor &b2, const Scalar &beta, const Scalar &alpha)
{
	Tensor out = at::empty({0}, self.options());
	return addbmm_o(self, b1, b2, beta, alpha, out);
}
Tensor &addbmm_i(Tensor &self, const Tensor &b1, const Tensor &b2, const Scalar &beta, const Scalar &alpha)
{
	return assign_out(self, addbmm_dev(self, b1, b2, beta, alpha));
}

// ---- group norm ----

std::tuple<Tensor, Tensor, Tensor> group_norm_dev(const Tensor &x, const std::optional<Tensor> &w, const std::optional<Tensor> &b,
					      int64_t N, int64_t C, int64_t HxW, int64_t group, double eps)
{
	NEURON_NATIVE("native_group_norm");
	const Tensor wt = w ? *w : Tensor(), bs = b ? *b : Tensor();
	if (!floats_on_device({&x, &wt, &bs}) || x.numel() != N * C * HxW) {
		note_fallback("native_group_norm");
		auto [o, m, r] = at::native_group_norm(x.cpu(), cpu_opt(w), cpu_opt(b), N, C, HxW, group, eps);
		return {to_dev(o, x), to_dev(m, x), to_dev(r, x)};
	}
	const Tensor g = x.reshape({N, group, -1}).to(c10::kFloat);
	const Tensor mean = g.mean(-1, true);
	const Tensor var = (g - mean).square().mean(-1, true);
	const Tensor rstd = at::rsqrt(var + eps);
	Tensor y = ((g - mean) * rstd).view({N, C, -1});
	if (wt.defined())
		y = y * wt.view({1, C, 1});
	if (bs.defined())
		y = y + bs.view({1, C, 1});
	return {y.view(x.sizes()).to(x.scalar_type()), mean.view({N, group}).to(x.scalar_type()),
		rstd.view({N, group}).to(x.scalar_type())};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward_dev(const Tensor &gy, const Tensor &x, const Tensor &mean,
						       const Tensor &rstd, const std::optional<Tensor> &w, int64_t N,
						       int64_t C, int64_t HxW, int64_t group, std::array<bool, 3> mask)
{
	NEURON_NATIVE("native_group_norm_backward");
	const Tensor wt = w ? *w : Tensor();
	if (!floats_on_device({&gy, &x, &mean, &rstd, &wt})) {
		note_fallback("native_group_norm_backward");
		auto [a, bb, c] = at::native_group_norm_backward(gy.cpu(), x.cpu(), mean.cpu(), rstd.cpu(), cpu_opt(w), N, C,
								 HxW, group, mask);
		return {to_dev(a, x), to_dev(bb, x), to_dev(c, x)};
	}
	const int64_t cpg = C / group;
	const Tensor xg = x.reshape({N, group, cpg, -1}), gg = gy.reshape({N, group, cpg, -1});
	const Tensor m = mean.view({N, group, 1, 1}), r = rstd.view({N, group, 1, 1});
	const Tensor xhat = (xg - m) * r;
	Tensor dx, dw, db;
	if (mask[0]) {
		const Tensor g = wt.defined() ? gg * wt.view({1, group, cpg, 1}) : gg;
		const Tensor m1 = g.mean({2, 3}, true), m2 = (g * xhat).mean({2, 3}, true);
		dx = ((g - m1 - xhat * m2) * r).view(x.sizes());
	}
	if (mask[1])
		dw = (gg * xhat).sum({0, 3}).reshape({C});
	if (mask[2])
		db = gg.sum({0, 3}).reshape({C});
	return {dx, dw, db};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REG_PAD(name) m.impl(#name, &name); m.impl(#name "_backward", &name##_backward);
	REG_PAD(reflection_pad1d) REG_PAD(reflection_pad2d) REG_PAD(reflection_pad3d)
	REG_PAD(replication_pad1d) REG_PAD(replication_pad2d) REG_PAD(replication_pad3d)
	m.impl("max_unpool2d", &max_unpool2d_dev);
	m.impl("max_unpool3d", &max_unpool3d_dev);
	m.impl("im2col", &im2col_dev);
	m.impl("col2im", &col2im_dev);
	m.impl("linalg_cross", &linalg_cross_dev);
	m.impl("linalg_cross.out", &linalg_cross_o);
	m.impl("addbmm", &addbmm_dev);
	m.impl("addbmm.out", &addbmm_o);
	m.impl("addbmm_", &addbmm_i);
	m.impl("native_group_norm", &group_norm_dev);
	m.impl("native_group_norm_backward", &group_norm_backward_dev);
}

} // namespace torch_neuron
