// Upsampling (nearest, nearest-exact, linear / bilinear / trilinear, bicubic, and
// the antialiased bilinear / bicubic) over 1-3 spatial dims, + backward.
//
// Every mode is separable: along each spatial dim, output position o is a weighted
// sum of a few input positions (its taps: 1 for nearest, 2 linear, 4 cubic, a
// scale-dependent count for antialiasing). The taps come from PyTorch's own
// formulas (aten/src/ATen/native/UpSample.h) computed on the host once per
// (mode, sizes, scale) and kept on the device; the data never leaves it:
//   forward   y = sum_t index_select(x, dim, index_t) * weight_t
//   backward  dx = sum_t zeros.index_add(dim, index_t, dy * weight_t)
#include "pool_common.h"

#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>

namespace torch_neuron {

namespace {

enum class Mode { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA };

struct DimTaps {
	Tensor index;  // [T, O] int64
	Tensor weight; // [T, O] float (unused for the nearest modes)
};

// area_pixel_compute_scale / compute_scales_value of UpSample.h.
double pixel_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale)
{
	if (align_corners)
		return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
	return scale && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
}

double source_index(double scale, int64_t o, bool align_corners, bool cubic)
{
	if (align_corners)
		return scale * static_cast<double>(o);
	const double src = scale * (static_cast<double>(o) + 0.5) - 0.5;
	return (!cubic && src < 0) ? 0.0 : src;
}

double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

double aa_filter(Mode m, double x)
{
	x = std::fabs(x);
	if (m == Mode::LinearAA)
		return x < 1 ? 1 - x : 0;
	const double a = -0.5; // the antialiased bicubic uses Keys' a = -0.5 (PIL's)
	return x < 1 ? cubic1(x, a) : x < 2 ? cubic2(x, a) : 0;
}

// Host tables of one dim: taps[t][o] = (input index, weight).
void make_taps(Mode m, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
	       std::vector<std::vector<std::pair<int64_t, float>>> &taps)
{
	taps.clear();
	auto set = [&](size_t t, int64_t o, int64_t i, double w) {
		if (taps.size() <= t)
			taps.resize(t + 1, std::vector<std::pair<int64_t, float>>(static_cast<size_t>(out), {0, 0.0f}));
		taps[t][static_cast<size_t>(o)] = {std::clamp<int64_t>(i, 0, in - 1), static_cast<float>(w)};
	};
	if (m == Mode::Nearest || m == Mode::NearestExact) {
		// nearest_idx / nearest_exact_idx: float arithmetic, as PyTorch.
		const float s = static_cast<float>(scale && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out));
		for (int64_t o = 0; o < out; ++o) {
			int64_t i;
			if (m == Mode::Nearest && out == in)
				i = o;
			else if (m == Mode::Nearest && out == 2 * in)
				i = o >> 1;
			else
				i = std::min(static_cast<int64_t>(std::floor((static_cast<float>(o) + (m == Mode::NearestExact ? 0.5f : 0.0f)) * s)),
					     in - 1);
			set(0, o, i, 1.0);
		}
		return;
	}
	const double sc = pixel_scale(in, out, align_corners, scale);
	if (m == Mode::Linear) {
		for (int64_t o = 0; o < out; ++o) {
			const double real = source_index(sc, o, align_corners, false);
			const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
			const double lambda = std::clamp(real - static_cast<double>(i0), 0.0, 1.0);
			set(0, o, i0, 1 - lambda);
			set(1, o, i0 + (i0 < in - 1 ? 1 : 0), lambda);
		}
		return;
	}
	if (m == Mode::Cubic) {
		const double a = -0.75;
		for (int64_t o = 0; o < out; ++o) {
			const double real = source_index(sc, o, align_corners, true);
			const int64_t i0 = static_cast<int64_t>(std::floor(real));
			const double t = real - static_cast<double>(i0);
			const double w[4] = {cubic2(t + 1, a), cubic1(t, a), cubic1(1 - t, a), cubic2(2 - t, a)};
			for (int k = 0; k < 4; ++k)
				set(static_cast<size_t>(k), o, i0 - 1 + k, w[k]);
		}
		return;
	}
	// Antialiased (_compute_indices_min_size_weights_aa): a filter stretched by the
	// downscale factor, normalised over the input positions it covers.
	const double interp = m == Mode::LinearAA ? 2 : 4;
	const double support = sc >= 1 ? interp * 0.5 * sc : interp * 0.5;
	const double inv = sc >= 1 ? 1.0 / sc : 1.0;
	const int64_t max_taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
	for (int64_t o = 0; o < out; ++o) {
		const double center = sc * (static_cast<double>(o) + 0.5);
		const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
		const int64_t xsize = std::clamp<int64_t>(std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - xmin,
							  0, max_taps);
		std::vector<double> w(static_cast<size_t>(xsize));
		double total = 0;
		for (int64_t j = 0; j < xsize; ++j)
			total += w[static_cast<size_t>(j)] = aa_filter(m, (static_cast<double>(j + xmin) - center + 0.5) * inv);
		for (int64_t j = 0; j < max_taps; ++j)
			set(static_cast<size_t>(j), o, j < xsize ? xmin + j : xmin,
			    j < xsize && total != 0 ? w[static_cast<size_t>(j)] / total : 0.0);
	}
}

DimTaps dim_taps(const Tensor &like, Mode m, int64_t in, int64_t out, bool align_corners, std::optional<double> scale)
{
	const std::string key = "upsample/" + std::to_string(static_cast<int>(m)) + "/" + std::to_string(in) + "," +
				std::to_string(out) + "," + std::to_string(align_corners) + "," +
				(scale ? std::to_string(*scale) : std::string("-"));
	std::vector<std::vector<std::pair<int64_t, float>>> taps;
	auto build = [&] {
		if (taps.empty())
			make_taps(m, in, out, align_corners, scale, taps);
	};
	Tensor index = cached_table(key + "/index", like, [&] {
		build();
		Tensor t = at::empty({static_cast<int64_t>(taps.size()), out}, at::TensorOptions().dtype(c10::kLong));
		for (size_t k = 0; k < taps.size(); ++k)
			for (int64_t o = 0; o < out; ++o)
				t[static_cast<int64_t>(k)][o] = taps[k][static_cast<size_t>(o)].first;
		return t;
	});
	Tensor weight = cached_table(key + "/weight", like, [&] {
		build();
		Tensor t = at::empty({static_cast<int64_t>(taps.size()), out}, at::TensorOptions().dtype(c10::kFloat));
		for (size_t k = 0; k < taps.size(); ++k)
			for (int64_t o = 0; o < out; ++o)
				t[static_cast<int64_t>(k)][o] = taps[k][static_cast<size_t>(o)].second;
		return t;
	});
	return {index, weight};
}

bool nearest(Mode m) { return m == Mode::Nearest || m == Mode::NearestExact; }

// weight row t of a dim, shaped to broadcast along dim `d` of a rank-`nd` tensor.
Tensor weight_along(const DimTaps &dt, int64_t t, int64_t d, int64_t nd, c10::ScalarType dtype)
{
	std::vector<int64_t> shape(static_cast<size_t>(nd), 1);
	shape[static_cast<size_t>(d)] = dt.weight.size(1);
	Tensor w = dt.weight[t].view(shape);
	return w.scalar_type() == dtype ? w : w.to(dtype);
}

Tensor resample_dim(const Tensor &x, int64_t d, const DimTaps &dt, Mode m)
{
	Tensor acc;
	for (int64_t t = 0; t < dt.index.size(0); ++t) {
		Tensor g = at::index_select(x, d, dt.index[t]);
		if (!nearest(m))
			g = g * weight_along(dt, t, d, x.dim(), x.scalar_type());
		acc = acc.defined() ? acc.add_(g) : g;
	}
	return acc;
}

Tensor resample_dim_backward(const Tensor &g, int64_t d, int64_t in, const DimTaps &dt, Mode m)
{
	std::vector<int64_t> shape(g.sizes().begin(), g.sizes().end());
	shape[static_cast<size_t>(d)] = in;
	Tensor out = at::zeros(shape, g.options());
	for (int64_t t = 0; t < dt.index.size(0); ++t) {
		const Tensor src = nearest(m) ? g : g * weight_along(dt, t, d, g.dim(), g.scalar_type());
		out.index_add_(d, dt.index[t], src);
	}
	return out;
}

using Scales = std::vector<std::optional<double>>;

Tensor upsample(const char *name, Mode m, const Tensor &x, c10::IntArrayRef out, bool align_corners, const Scales &sc)
{
	const int nd = static_cast<int>(out.size());
	TORCH_CHECK(x.dim() == nd + 2, name, ": expected a ", nd + 2, "-d input, got ", x.dim(), "-d");
	Tensor r = x;
	for (int i = 0; i < nd; ++i) {
		const int64_t d = 2 + i;
		r = resample_dim(r, d, dim_taps(x, m, x.size(d), out[static_cast<size_t>(i)], align_corners, sc[static_cast<size_t>(i)]), m);
	}
	return r.contiguous();
}

Tensor upsample_backward(const Tensor &g, Mode m, c10::IntArrayRef out, c10::IntArrayRef in, bool align_corners,
			 const Scales &sc)
{
	const int nd = static_cast<int>(out.size());
	Tensor r = g;
	for (int i = nd - 1; i >= 0; --i) {
		const int64_t d = 2 + i;
		const int64_t isz = in[static_cast<size_t>(d)];
		r = resample_dim_backward(r, d, isz, dim_taps(g, m, isz, out[static_cast<size_t>(i)], align_corners, sc[static_cast<size_t>(i)]), m);
	}
	return r;
}

bool upsample_ok(const Tensor &t) { return float_dev(t) && t.numel() > 0; }

#define UPSAMPLE_NEAREST(name, MODE, ND, ...)                                                                        \
	Tensor name(const Tensor &x, c10::SymIntArrayRef out_s, __VA_ARGS__)                                         \
	{                                                                                                           \
		const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s);                                        \
		const Scales sc = SCALES_##ND;                                                                      \
		if (!upsample_ok(x)) {                                                                              \
			note_fallback("aten::" #name);                                                              \
			return at::name(x.cpu(), out, SCALE_ARGS_##ND).to(x.device());                              \
		}                                                                                                   \
		NEURON_NATIVE(#name);                                                                               \
		return upsample(#name, MODE, x, out, false, sc);                                                    \
	}                                                                                                           \
	Tensor name##_backward(const Tensor &g, c10::SymIntArrayRef out_s, c10::SymIntArrayRef in_s, __VA_ARGS__)   \
	{                                                                                                           \
		const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s), in = C10_AS_INTARRAYREF_SLOW(in_s);    \
		const Scales sc = SCALES_##ND;                                                                      \
		if (!upsample_ok(g)) {                                                                              \
			note_fallback("aten::" #name "_backward");                                                  \
			return at::name##_backward(g.cpu(), out, in, SCALE_ARGS_##ND).to(g.device());               \
		}                                                                                                   \
		NEURON_NATIVE(#name "_backward");                                                                   \
		return upsample_backward(g, MODE, out, in, false, sc);                                              \
	}

#define SCALES_1 Scales{s0}
#define SCALES_2 Scales{s0, s1}
#define SCALES_3 Scales{s0, s1, s2}
#define SCALE_ARGS_1 s0
#define SCALE_ARGS_2 s0, s1
#define SCALE_ARGS_3 s0, s1, s2
using OD = std::optional<double>;

UPSAMPLE_NEAREST(upsample_nearest1d, Mode::Nearest, 1, OD s0)
UPSAMPLE_NEAREST(upsample_nearest2d, Mode::Nearest, 2, OD s0, OD s1)
UPSAMPLE_NEAREST(upsample_nearest3d, Mode::Nearest, 3, OD s0, OD s1, OD s2)
UPSAMPLE_NEAREST(_upsample_nearest_exact1d, Mode::NearestExact, 1, OD s0)
UPSAMPLE_NEAREST(_upsample_nearest_exact2d, Mode::NearestExact, 2, OD s0, OD s1)
UPSAMPLE_NEAREST(_upsample_nearest_exact3d, Mode::NearestExact, 3, OD s0, OD s1, OD s2)

#define UPSAMPLE_INTERP(name, MODE, ND, ...)                                                                         \
	Tensor name(const Tensor &x, c10::SymIntArrayRef out_s, bool align_corners, __VA_ARGS__)                     \
	{                                                                                                           \
		const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s);                                        \
		const Scales sc = SCALES_##ND;                                                                      \
		if (!upsample_ok(x)) {                                                                              \
			note_fallback("aten::" #name);                                                              \
			return at::name(x.cpu(), out, align_corners, SCALE_ARGS_##ND).to(x.device());               \
		}                                                                                                   \
		NEURON_NATIVE(#name);                                                                               \
		return upsample(#name, MODE, x, out, align_corners, sc);                                            \
	}                                                                                                           \
	Tensor name##_backward(const Tensor &g, c10::SymIntArrayRef out_s, c10::SymIntArrayRef in_s, bool align_corners, \
			       __VA_ARGS__)                                                                         \
	{                                                                                                           \
		const c10::IntArrayRef out = C10_AS_INTARRAYREF_SLOW(out_s), in = C10_AS_INTARRAYREF_SLOW(in_s);    \
		const Scales sc = SCALES_##ND;                                                                      \
		if (!upsample_ok(g)) {                                                                              \
			note_fallback("aten::" #name "_backward");                                                  \
			return at::name##_backward(g.cpu(), out, in, align_corners, SCALE_ARGS_##ND).to(g.device()); \
		}                                                                                                   \
		NEURON_NATIVE(#name "_backward");                                                                   \
		return upsample_backward(g, MODE, out, in, align_corners, sc);                                      \
	}

UPSAMPLE_INTERP(upsample_linear1d, Mode::Linear, 1, OD s0)
UPSAMPLE_INTERP(upsample_bilinear2d, Mode::Linear, 2, OD s0, OD s1)
UPSAMPLE_INTERP(upsample_trilinear3d, Mode::Linear, 3, OD s0, OD s1, OD s2)
UPSAMPLE_INTERP(upsample_bicubic2d, Mode::Cubic, 2, OD s0, OD s1)
UPSAMPLE_INTERP(_upsample_bilinear2d_aa, Mode::LinearAA, 2, OD s0, OD s1)
UPSAMPLE_INTERP(_upsample_bicubic2d_aa, Mode::CubicAA, 2, OD s0, OD s1)

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REG_UP(name) m.impl(#name, &name); m.impl(#name "_backward", &name##_backward);
	REG_UP(upsample_nearest1d) REG_UP(upsample_nearest2d) REG_UP(upsample_nearest3d)
	REG_UP(_upsample_nearest_exact1d) REG_UP(_upsample_nearest_exact2d) REG_UP(_upsample_nearest_exact3d)
	REG_UP(upsample_linear1d) REG_UP(upsample_bilinear2d) REG_UP(upsample_trilinear3d) REG_UP(upsample_bicubic2d)
	REG_UP(_upsample_bilinear2d_aa) REG_UP(_upsample_bicubic2d_aa)
}

} // namespace torch_neuron
