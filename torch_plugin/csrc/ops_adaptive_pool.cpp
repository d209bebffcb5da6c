// Adaptive pooling over 1-3 spatial dims (+ backward). Output cell i of a dim of
// input length I and output length O covers [floor(i I / O), ceil((i + 1) I / O)).
//  - average: separable, so one small matrix per dim ([O, I], each row 1/len over
//    its window) applied with a matmul along that dim; the backward applies the
//    transposes. The matrices depend only on (I, O) and are kept on the device.
//  - max: the windows are gathered (INDEX_SELECT per dim with an [O, Kmax] index
//    that repeats a window's last element where it is shorter, which changes
//    neither the max nor the first index of it), reduced over the taps, and the
//    winning tap mapped to its flat input index through a table; the backward is
//    the max-pool scatter (pool_common.h).
#include "pool_common.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

int64_t win_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t win_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// [O, I] averaging matrix of one dim, in like's dtype on its device.
Tensor avg_matrix(const Tensor &like, int64_t in, int64_t out)
{
	Tensor m = cached_table("adaptive_avg/" + std::to_string(in) + "," + std::to_string(out), like, [&] {
		Tensor a = at::zeros({out, in}, at::TensorOptions().dtype(c10::kFloat));
		auto acc = a.accessor<float, 2>();
		for (int64_t i = 0; i < out; ++i) {
			const int64_t s = win_start(i, in, out), e = win_end(i, in, out);
			for (int64_t j = s; j < e; ++j)
				acc[i][j] = 1.0f / static_cast<float>(e - s);
		}
		return a;
	});
	return m.scalar_type() == like.scalar_type() ? m : m.to(like.scalar_type());
}

// x with each of its last nd dims multiplied by a matrix: mats[i] is [new, old].
Tensor apply_per_dim(Tensor x, const std::vector<Tensor> &mats)
{
	const int nd = static_cast<int>(mats.size());
	for (int i = 0; i < nd; ++i) {
		const int64_t dim = x.dim() - nd + i;
		x = at::matmul(x.movedim(dim, -1), mats[static_cast<size_t>(i)].t()).movedim(-1, dim);
	}
	return x;
}

bool adaptive_ok(const Tensor &x, c10::IntArrayRef out, int nd)
{
	if (!float_dev(x) || static_cast<int>(out.size()) != nd || (x.dim() != nd + 1 && x.dim() != nd + 2))
		return false;
	for (int i = 0; i < nd; ++i)
		if (out[static_cast<size_t>(i)] <= 0 || x.size(x.dim() - nd + i) <= 0)
			return false;
	return true;
}

// The shape adaptive pooling of x gives (its leading dims, then `out`).
std::vector<int64_t> pooled_shape(const Tensor &x, c10::IntArrayRef out)
{
	std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - static_cast<int64_t>(out.size()));
	s.insert(s.end(), out.begin(), out.end());
	return s;
}

template <int ND> Tensor adaptive_avg(const Tensor &x, c10::IntArrayRef out)
{
	if (!adaptive_ok(x, out, ND)) {
		note_fallback(ND == 2 ? "aten::_adaptive_avg_pool2d" : "aten::_adaptive_avg_pool3d");
		return (ND == 2 ? at::_adaptive_avg_pool2d(x.cpu(), out) : at::_adaptive_avg_pool3d(x.cpu(), out)).to(x.device());
	}
	NEURON_NATIVE(ND == 2 ? "_adaptive_avg_pool2d" : "_adaptive_avg_pool3d");
	if (x.numel() == 0)
		return at::empty(pooled_shape(x, out), x.options());
	std::vector<Tensor> mats;
	for (int i = 0; i < ND; ++i)
		mats.push_back(avg_matrix(x, x.size(x.dim() - ND + i), out[static_cast<size_t>(i)]));
	return apply_per_dim(x, mats).contiguous();
}
Tensor adaptive_avg2d(const Tensor &x, c10::SymIntArrayRef out) { return adaptive_avg<2>(x, C10_AS_INTARRAYREF_SLOW(out)); }
Tensor adaptive_avg3d(const Tensor &x, c10::SymIntArrayRef out) { return adaptive_avg<3>(x, C10_AS_INTARRAYREF_SLOW(out)); }

template <int ND> Tensor adaptive_avg_bwd(const Tensor &grad, const Tensor &x)
{
	std::vector<int64_t> out(grad.sizes().end() - ND, grad.sizes().end());
	if (!adaptive_ok(x, out, ND) || !float_dev(grad)) {
		note_fallback(ND == 2 ? "aten::_adaptive_avg_pool2d_backward" : "aten::_adaptive_avg_pool3d_backward");
		return (ND == 2 ? at::_adaptive_avg_pool2d_backward(grad.cpu(), x.cpu())
				: at::_adaptive_avg_pool3d_backward(grad.cpu(), x.cpu()))
			.to(x.device());
	}
	NEURON_NATIVE(ND == 2 ? "_adaptive_avg_pool2d_backward" : "_adaptive_avg_pool3d_backward");
	std::vector<Tensor> mats;
	for (int i = 0; i < ND; ++i)
		mats.push_back(avg_matrix(grad, x.size(x.dim() - ND + i), out[static_cast<size_t>(i)]).t());
	return apply_per_dim(grad, mats).contiguous();
}

// ---- adaptive max ----

// [O * K] index of one dim's windows (K = the longest window), padded with each
// window's last element.
Tensor window_index(const Tensor &like, int64_t in, int64_t out, int64_t &k)
{
	k = 0;
	for (int64_t i = 0; i < out; ++i)
		k = std::max(k, win_end(i, in, out) - win_start(i, in, out));
	const int64_t kk = k;
	return cached_table("adaptive_max_ix/" + std::to_string(in) + "," + std::to_string(out), like, [&] {
		Tensor ix = at::empty({out * kk}, at::TensorOptions().dtype(c10::kLong));
		int64_t *p = ix.data_ptr<int64_t>();
		for (int64_t i = 0; i < out; ++i) {
			const int64_t s = win_start(i, in, out), e = win_end(i, in, out);
			for (int64_t t = 0; t < kk; ++t)
				p[i * kk + t] = std::min(s + t, e - 1);
		}
		return ix;
	});
}

// For output cell o (flattened over the nd dims) and tap t (flattened over the
// taps): the flat input index it reads.
Tensor tap_to_input(const Tensor &like, const int64_t *in, const int64_t *out, const int64_t *k, int nd)
{
	std::string key = "adaptive_max_map";
	for (int i = 0; i < nd; ++i)
		key += "/" + std::to_string(in[i]) + "," + std::to_string(out[i]);
	return cached_table(key, like, [&] {
		int64_t cells = 1, taps = 1;
		for (int i = 0; i < nd; ++i)
			cells *= out[i], taps *= k[i];
		Tensor m = at::empty({cells, taps}, at::TensorOptions().dtype(c10::kLong));
		int64_t *p = m.data_ptr<int64_t>();
		for (int64_t c = 0; c < cells; ++c)
			for (int64_t t = 0; t < taps; ++t) {
				int64_t rc = c, rt = t, index = 0, o[3], tp[3];
				for (int i = nd - 1; i >= 0; --i)
					o[i] = rc % out[i], rc /= out[i], tp[i] = rt % k[i], rt /= k[i];
				for (int i = 0; i < nd; ++i) {
					const int64_t at_ = std::min(win_start(o[i], in[i], out[i]) + tp[i], win_end(o[i], in[i], out[i]) - 1);
					index = index * in[i] + at_;
				}
				p[c * taps + t] = index;
			}
		return m;
	});
}

template <int ND> std::tuple<Tensor, Tensor> adaptive_max(const Tensor &x_in, c10::IntArrayRef out)
{
	if (!adaptive_ok(x_in, out, ND)) {
		note_fallback(ND == 2 ? "aten::adaptive_max_pool2d" : "aten::adaptive_max_pool3d");
		auto [v, i] = ND == 2 ? at::adaptive_max_pool2d(x_in.cpu(), out) : at::adaptive_max_pool3d(x_in.cpu(), out);
		return {v.to(x_in.device()), i.to(x_in.device())};
	}
	NEURON_NATIVE(ND == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d");
	if (x_in.numel() == 0)
		return {at::empty(pooled_shape(x_in, out), x_in.options()),
			at::empty(pooled_shape(x_in, out), x_in.options().dtype(c10::kLong))};
	const Tensor x = batched(x_in, ND);
	int64_t in[3], o[3], k[3];
	Tensor g = x;
	for (int i = 0; i < ND; ++i) {
		in[i] = x.size(2 + i), o[i] = out[static_cast<size_t>(i)];
		g = at::index_select(g, 2 + i, window_index(x, in[i], o[i], k[i]));
	}
	// [N, C, O0*K0, O1*K1, ..] -> [N, C, O0, O1, .., K0*K1*..]
	std::vector<int64_t> split{x.size(0), x.size(1)};
	for (int i = 0; i < ND; ++i)
		split.push_back(o[i]), split.push_back(k[i]);
	std::vector<int64_t> perm{0, 1};
	for (int i = 0; i < ND; ++i)
		perm.push_back(2 + 2 * i);
	for (int i = 0; i < ND; ++i)
		perm.push_back(3 + 2 * i);
	std::vector<int64_t> cells{x.size(0), x.size(1)};
	int64_t ncell = 1;
	for (int i = 0; i < ND; ++i)
		cells.push_back(o[i]), ncell *= o[i];
	cells.push_back(-1);
	Tensor taps = g.view(split).permute(perm).reshape(cells);
	auto [vals, tap] = at::max(taps, -1);
	// The tap's flat input index: gather from the [cells, taps] map.
	const Tensor map = tap_to_input(x, in, o, k, ND);
	Tensor cell = at::arange(ncell, tap.options()).view(std::vector<int64_t>(cells.begin() + 2, cells.end() - 1));
	Tensor flat = at::add(at::mul(cell, map.size(1)), tap);
	Tensor idx = at::index_select(map.reshape({-1}), 0, flat.reshape({-1})).view(tap.sizes());
	return {unbatched_like(vals, x_in, ND), unbatched_like(idx, x_in, ND)};
}
std::tuple<Tensor, Tensor> adaptive_max2d(const Tensor &x, c10::IntArrayRef out) { return adaptive_max<2>(x, out); }
std::tuple<Tensor, Tensor> adaptive_max3d(const Tensor &x, c10::IntArrayRef out) { return adaptive_max<3>(x, out); }

template <int ND> Tensor adaptive_max_bwd(const Tensor &grad, const Tensor &x, const Tensor &indices)
{
	if (!float_dev(grad) || !index_ok(indices) || (x.dim() != ND + 1 && x.dim() != ND + 2)) {
		note_fallback(ND == 2 ? "aten::adaptive_max_pool2d_backward" : "aten::adaptive_max_pool3d_backward");
		return (ND == 2 ? at::adaptive_max_pool2d_backward(grad.cpu(), x.cpu(), indices.cpu())
				: at::adaptive_max_pool3d_backward(grad.cpu(), x.cpu(), indices.cpu()))
			.to(x.device());
	}
	NEURON_NATIVE(ND == 2 ? "adaptive_max_pool2d_backward" : "adaptive_max_pool3d_backward");
	return scatter_max_grad(grad, x, indices, ND);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_adaptive_avg_pool2d", &adaptive_avg2d);
	m.impl("_adaptive_avg_pool2d_backward", &adaptive_avg_bwd<2>);
	m.impl("_adaptive_avg_pool3d", &adaptive_avg3d);
	m.impl("_adaptive_avg_pool3d_backward", &adaptive_avg_bwd<3>);
	m.impl("adaptive_max_pool2d", &adaptive_max2d);
	m.impl("adaptive_max_pool2d_backward", &adaptive_max_bwd<2>);
	m.impl("adaptive_max_pool3d", &adaptive_max3d);
	m.impl("adaptive_max_pool3d_backward", &adaptive_max_bwd<3>);
}

} // namespace torch_neuron
