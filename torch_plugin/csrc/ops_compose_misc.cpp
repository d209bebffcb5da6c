// Small ops composed of native ops that library functions lean on: isnan,
// eye, the legacy norm and cholesky entry points, bitwise ops of bool tensors,
// pow with a scalar base, clamp_min / clamp_max with tensor bounds,
// channel_shuffle, and the distance matrices cdist / pdist (forward).
#include "compose.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

Tensor isnan_dev(const Tensor &x)
{
	NEURON_NATIVE("isnan");
	if (!all_on_device({&x}))
		return note_fallback("isnan"), to_dev(at::isnan(x.cpu()), x);
	if (!at::isFloatingType(x.scalar_type()))
		return at::zeros(x.sizes(), x.options().dtype(c10::kBool));
	return at::ne(x, x);
}

Tensor &eye_m_o(int64_t n, int64_t m, Tensor &out)
{
	NEURON_NATIVE("eye");
	TORCH_CHECK(n >= 0 && m >= 0, "eye: n and m must be non-negative, got ", n, " and ", m);
	out.resize_({n, m});
	if (!chip_ok(out))
		return note_fallback("eye.m_out"), assign_out(out, at::eye(n, m, out.options().device(c10::kCPU)));
	fill_cmd(out, 0);
	if (n && m)
		fill_cmd(out.diagonal(), 1);
	return out;
}
Tensor &eye_o(int64_t n, Tensor &out) { return eye_m_o(n, n, out); }

Tensor &norm_dtype_o(const Tensor &x, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim,
		     c10::ScalarType dtype, Tensor &out)
{
	NEURON_NATIVE("norm");
	return assign_out(out, at::linalg_vector_norm(x, p.value_or(2), dim, keepdim, dtype));
}
Tensor &norm_o(const Tensor &x, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim, Tensor &out)
{
	NEURON_NATIVE("norm");
	return assign_out(out, at::linalg_vector_norm(x, p.value_or(2), dim, keepdim));
}
Tensor norm_dim(const Tensor &x, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim)
{
	Tensor out = at::empty({0}, x.options());
	return norm_o(x, p, dim, keepdim, out);
}
Tensor norm_dim_dtype(const Tensor &x, const std::optional<Scalar> &p, c10::IntArrayRef dim, bool keepdim,
		      c10::ScalarType dtype)
{
	Tensor out = at::empty({0}, x.options().dtype(dtype));
	return norm_dtype_o(x, p, dim, keepdim, dtype, out);
}

Tensor cholesky_legacy(const Tensor &A, bool upper)
{
	NEURON_NATIVE("cholesky");
	auto [L, info] = at::linalg_cholesky_ex(A, upper, false);
	at::_linalg_check_errors(info, "cholesky", A.dim() == 2);
	return L;
}
Tensor &cholesky_legacy_o(const Tensor &A, bool upper, Tensor &out) { return assign_out(out, cholesky_legacy(A, upper)); }

// bitwise ops of bool tensors are the logical ones; integers stay on the CPU.
template <int OP> Tensor &bitwise_o(const Tensor &a, const Tensor &b, Tensor &out)
{
	NEURON_NATIVE("bitwise");
	const bool bools = a.scalar_type() == c10::kBool && b.scalar_type() == c10::kBool;
	if (!bools || !all_on_device({&a}) || (b.device().is_privateuseone() && !chip_ok(b))) {
		note_fallback(OP == 0 ? "bitwise_and" : OP == 1 ? "bitwise_or" : "bitwise_xor");
		Tensor r = OP == 0 ? at::bitwise_and(a.cpu(), b.cpu()) : OP == 1 ? at::bitwise_or(a.cpu(), b.cpu())
										   : at::bitwise_xor(a.cpu(), b.cpu());
		return assign_out(out, r);
	}
	const Tensor bb = on_device(b, a);
	return assign_out(out, OP == 0 ? at::logical_and(a, bb) : OP == 1 ? at::logical_or(a, bb) : at::logical_xor(a, bb));
}
Tensor &bitwise_not_o(const Tensor &a, Tensor &out)
{
	NEURON_NATIVE("bitwise_not");
	if (a.scalar_type() != c10::kBool || !all_on_device({&a}))
		return note_fallback("bitwise_not"), assign_out(out, at::bitwise_not(a.cpu()));
	return assign_out(out, at::logical_not(a));
}

// base ** x: exp2(x) for base 2 (exact for integer x, as ldexp needs), else exp(x log(base)).
Tensor &pow_scalar_o(const Scalar &base, const Tensor &x, Tensor &out)
{
	NEURON_NATIVE("pow");
	if (!all_on_device({&x}) || base.isComplex() || (!at::isFloatingType(x.scalar_type()) && !base.isFloatingPoint()))
		return note_fallback("pow.Scalar"), assign_out(out, at::pow(base, x.cpu()));
	const double b = base.toDouble();
	const Tensor xf = at::isFloatingType(x.scalar_type()) ? x : x.to(c10::typeMetaToScalarType(c10::get_default_dtype()));
	if (b == 2.0)
		return assign_out(out, at::exp2(xf));
	if (b == 1.0)
		return assign_out(out, at::ones_like(xf));
	return assign_out(out, at::where(xf == 0, 1.0, at::exp(xf * std::log(b))).to(xf.scalar_type()));
}
Tensor pow_scalar(const Scalar &base, const Tensor &x)
{
	Tensor out = at::empty({0}, x.options().dtype(at::isFloatingType(x.scalar_type())
								 ? x.scalar_type()
								 : c10::typeMetaToScalarType(c10::get_default_dtype())));
	return pow_scalar_o(base, x, out);
}

Tensor &clamp_min_t_o(const Tensor &x, const Tensor &lo, Tensor &out)
{
	NEURON_NATIVE("clamp_min");
	if (!all_on_device({&x, &lo}))
		return note_fallback("clamp_min.Tensor"), assign_out(out, at::clamp_min(x.cpu(), lo.cpu()));
	return assign_out(out, at::maximum(x, lo));
}
Tensor &clamp_max_t_o(const Tensor &x, const Tensor &hi, Tensor &out)
{
	NEURON_NATIVE("clamp_max");
	if (!all_on_device({&x, &hi}))
		return note_fallback("clamp_max.Tensor"), assign_out(out, at::clamp_max(x.cpu(), hi.cpu()));
	return assign_out(out, at::minimum(x, hi));
}
Tensor clamp_min_t(const Tensor &x, const Tensor &lo)
{
	Tensor out = at::empty({0}, x.options().dtype(at::result_type(x, lo)));
	return clamp_min_t_o(x, lo, out);
}
Tensor clamp_max_t(const Tensor &x, const Tensor &hi)
{
	Tensor out = at::empty({0}, x.options().dtype(at::result_type(x, hi)));
	return clamp_max_t_o(x, hi, out);
}

Tensor channel_shuffle_dev(const Tensor &x, int64_t groups)
{
	NEURON_NATIVE("channel_shuffle");
	TORCH_CHECK(groups > 0 && x.dim() >= 3 && x.size(1) % groups == 0, "channel_shuffle: the channels (",
		    x.dim() > 1 ? x.size(1) : 0, ") must divide into ", groups, " groups");
	std::vector<int64_t> split{x.size(0), groups, x.size(1) / groups};
	split.insert(split.end(), x.sizes().begin() + 2, x.sizes().end());
	return x.reshape(split).transpose(1, 2).reshape(x.sizes()).contiguous();
}

// Distances between the rows of x1 [.., P, M] and x2 [.., R, M] (p-norm of the
// difference), all pairs at once.
Tensor cdist_forward(const Tensor &x1, const Tensor &x2, double p, std::optional<int64_t>)
{
	NEURON_NATIVE("_cdist_forward");
	if (!floats_on_device({&x1, &x2}) || p < 0)
		return note_fallback("_cdist_forward"), to_dev(at::_cdist_forward(x1.cpu(), x2.cpu(), p, std::nullopt), x1);
	const Tensor d = at::abs(x1.unsqueeze(-2) - x2.unsqueeze(-3));
	return at::linalg_vector_norm(d, p, {-1}, false);
}

// The distances of every pair i < j of rows of x [N, M], in row-major order.
Tensor pdist_forward(const Tensor &x, double p)
{
	NEURON_NATIVE("_pdist_forward");
	if (!floats_on_device({&x}) || x.dim() != 2 || p < 0)
		return note_fallback("_pdist_forward"), to_dev(at::_pdist_forward(x.cpu(), p), x);
	const int64_t n = x.size(0);
	if (n < 2)
		return at::empty({0}, x.options());
	const Tensor pairs = at::triu_indices(n, n, 1, x.options().dtype(c10::kLong));
	const Tensor d = at::abs(at::index_select(x, 0, pairs[0]) - at::index_select(x, 0, pairs[1]));
	return at::linalg_vector_norm(d, p, {-1}, false);
}

// x = mantissa * 2^exponent, |mantissa| in [0.5, 1): the exponent from log2 and
// then corrected by one where log2's rounding crossed a power of two; zero, inf
// and NaN keep themselves with exponent 0, as frexp.
std::tuple<Tensor, Tensor> frexp_dev(const Tensor &x)
{
	NEURON_NATIVE("frexp");
	if (!floats_on_device({&x})) {
		note_fallback("frexp");
		auto [m, e] = at::frexp(x.cpu());
		return {to_dev(m, x), to_dev(e, x)};
	}
	const Tensor finite = at::logical_and(at::isfinite(x), x != 0);
	const Tensor ax = at::where(finite, at::abs(x), 1.0).to(c10::kFloat);
	Tensor e = at::floor(at::log2(ax)) + 1;
	Tensor m = ax * at::exp2(-e);
	e = at::where(m >= 1, e + 1, at::where(m < 0.5, e - 1, e));
	m = ax * at::exp2(-e);
	const Tensor mantissa = at::where(finite, at::copysign(m, x.to(c10::kFloat)), x.to(c10::kFloat)).to(x.scalar_type());
	return {mantissa, at::where(finite, e, 0.0).to(c10::kInt)};
}
std::tuple<Tensor &, Tensor &> frexp_o(const Tensor &x, Tensor &m, Tensor &e)
{
	auto [a, b] = frexp_dev(x);
	assign_out(m, a), assign_out(e, b);
	return {m, e};
}

Tensor reduce_loss(const Tensor &l, int64_t reduction)
{
	return reduction == 1 ? l.mean() : reduction == 2 ? l.sum() : l;
}

// sum over j != y of max(0, margin - x[y] + x[j])^p * w[y] / C, per sample.
Tensor multi_margin(const Tensor &x, const Tensor &target, const Scalar &p, const Scalar &margin,
		    const std::optional<Tensor> &weight, int64_t reduction)
{
	NEURON_NATIVE("multi_margin_loss");
	const Tensor w = weight ? *weight : Tensor();
	if (!floats_on_device({&x, &w}) || !index_ok(target) || (p.toLong() != 1 && p.toLong() != 2) || x.dim() > 2)
		return note_fallback("multi_margin_loss"),
		       to_dev(at::multi_margin_loss(x.cpu(), target.cpu(), p, margin, cpu_opt(weight), reduction), x);
	const Tensor xs = x.dim() == 2 ? x : x.reshape({1, -1}); // a 0-d or 1-d input is one sample
	const Tensor t = target.reshape({-1, 1}).to(c10::kLong);
	const int64_t C = xs.size(1);
	const Tensor xy = at::gather(xs, 1, t);
	Tensor h = at::clamp_min(margin.toDouble() - xy + xs, 0);
	if (p.toLong() == 2)
		h = h * h;
	if (w.defined())
		h = h * at::index_select(w, 0, t.reshape({-1})).unsqueeze(1);
	h = h.scatter(1, t, 0.0); // the target class itself does not count
	Tensor l = h.sum(1) / static_cast<double>(C);
	if (x.dim() < 2 && reduction == 0)
		l = l.squeeze(0);
	return reduce_loss(l, reduction);
}

// Targets are class indices ended by the first -1; each (target j, non-target k)
// pair adds max(0, 1 - (x[j] - x[k])) / C.
std::tuple<Tensor, Tensor> multilabel_margin(const Tensor &x, const Tensor &target, int64_t reduction)
{
	NEURON_NATIVE("multilabel_margin_loss_forward");
	if (!floats_on_device({&x}) || !index_ok(target) || x.dim() > 2) {
		note_fallback("multilabel_margin_loss_forward");
		auto [o, t] = at::multilabel_margin_loss_forward(x.cpu(), target.cpu(), reduction);
		return {to_dev(o, x), to_dev(t, x)};
	}
	const Tensor xs = x.dim() == 2 ? x : x.reshape({1, -1}), ts = target.reshape({xs.size(0), -1}).to(c10::kLong);
	const int64_t C = xs.size(1);
	// valid: before the first -1 of the row
	const Tensor valid = at::cumprod(ts != -1, 1).to(c10::kBool);
	const Tensor idx = at::where(valid, ts, C); // invalid ones go to a spare column
	// How often each class is listed (a repeated target counts each time, as on the CPU).
	const Tensor count = at::zeros({xs.size(0), C + 1}, xs.options())
				     .scatter_add(1, idx, at::ones(idx.sizes(), xs.options()))
				     .narrow(1, 0, C);
	const Tensor is_t = (count > 0).to(xs.scalar_type());
	// h[n, j, k] = max(0, 1 - x[j] + x[k]) for target j, non-target k
	const Tensor h = at::clamp_min(1 - xs.unsqueeze(2) + xs.unsqueeze(1), 0);
	const Tensor pair = count.unsqueeze(2) * (1 - is_t).unsqueeze(1);
	Tensor l = (h * pair).sum({1, 2}) / static_cast<double>(C);
	if (x.dim() < 2 && reduction == 0)
		l = l.squeeze(0);
	const Tensor is_target = is_t.view(x.sizes());
	return {reduce_loss(l, reduction), is_target.to(x.scalar_type())};
}

// linspace as PyTorch computes it: the first half counted up from start, the
// second down from end (so both ends are exact).
Tensor &linspace_o(const Scalar &start, const Scalar &end, int64_t steps, Tensor &out)
{
	NEURON_NATIVE("linspace");
	TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
	if (out.sizes() != c10::IntArrayRef{steps})
		out.resize_({steps});
	if (!float_dev(out))
		return note_fallback("linspace.out"), assign_out(out, at::linspace(start, end, steps, out.options().device(c10::kCPU)));
	if (steps == 0)
		return out;
	if (steps == 1)
		return fill_cmd(out, start), out;
	const double a = start.toDouble(), b = end.toDouble(), step = (b - a) / static_cast<double>(steps - 1);
	const Tensor i = at::arange(steps, out.options());
	const Tensor up = i * step + a, down = (i - static_cast<double>(steps - 1)) * step + b;
	return assign_out(out, at::where(i < static_cast<double>(steps / 2), up, down));
}
Tensor &logspace_o(const Scalar &start, const Scalar &end, int64_t steps, double base, Tensor &out)
{
	NEURON_NATIVE("logspace");
	if (!float_dev(out))
		return note_fallback("logspace.out"),
		       assign_out(out, at::logspace(start, end, steps, base, out.options().device(c10::kCPU)));
	Tensor lin = at::empty({steps}, out.options());
	linspace_o(start, end, steps, lin);
	return assign_out(out, at::pow(Scalar(base), lin));
}

// The (row, col) pairs of the upper (lower) triangle, row-major: a mask over the
// grid of positions, selected on the device.
Tensor triangle_indices(bool upper, int64_t row, int64_t col, int64_t offset, const c10::TensorOptions &opts)
{
	const Tensor r = at::arange(row, opts).unsqueeze(1).expand({row, col});
	const Tensor c = at::arange(col, opts).unsqueeze(0).expand({row, col});
	const Tensor keep = upper ? (c - r >= offset) : (c - r <= offset);
	return at::stack({at::masked_select(r, keep), at::masked_select(c, keep)});
}
Tensor triu_indices_dev(int64_t row, int64_t col, int64_t offset, std::optional<c10::ScalarType> dtype,
			std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>)
{
	NEURON_NATIVE("triu_indices");
	return triangle_indices(true, row, col, offset, at::TensorOptions().dtype(dtype.value_or(c10::kLong)).device(device));
}
Tensor tril_indices_dev(int64_t row, int64_t col, int64_t offset, std::optional<c10::ScalarType> dtype,
			std::optional<c10::Layout>, std::optional<c10::Device> device, std::optional<bool>)
{
	NEURON_NATIVE("tril_indices");
	return triangle_indices(false, row, col, offset, at::TensorOptions().dtype(dtype.value_or(c10::kLong)).device(device));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("view_as_real", &at::native::view_as_real);
	m.impl("view_as_complex", &at::native::view_as_complex);
	m.impl("linspace.out", &linspace_o);
	m.impl("logspace.out", &logspace_o);
	m.impl("triu_indices", &triu_indices_dev);
	m.impl("tril_indices", &tril_indices_dev);
	m.impl("frexp.Tensor", &frexp_dev);
	m.impl("frexp.Tensor_out", &frexp_o);
	m.impl("multi_margin_loss", &multi_margin);
	m.impl("multilabel_margin_loss_forward", &multilabel_margin);
	m.impl("isnan", &isnan_dev);
	m.impl("eye.out", &eye_o);
	m.impl("eye.m_out", &eye_m_o);
	m.impl("norm.ScalarOpt_dim", &norm_dim);
	m.impl("norm.ScalarOpt_dim_dtype", &norm_dim_dtype);
	m.impl("norm.out", &norm_o);
	m.impl("norm.dtype_out", &norm_dtype_o);
	m.impl("cholesky", &cholesky_legacy);
	m.impl("cholesky.out", &cholesky_legacy_o);
	m.impl("bitwise_and.Tensor_out", &bitwise_o<0>);
	m.impl("bitwise_or.Tensor_out", &bitwise_o<1>);
	m.impl("bitwise_xor.Tensor_out", &bitwise_o<2>);
	m.impl("bitwise_not.out", &bitwise_not_o);
	m.impl("pow.Scalar", &pow_scalar);
	m.impl("pow.Scalar_out", &pow_scalar_o);
	m.impl("clamp_min.Tensor", &clamp_min_t);
	m.impl("clamp_min.Tensor_out", &clamp_min_t_o);
	m.impl("clamp_max.Tensor", &clamp_max_t);
	m.impl("clamp_max.Tensor_out", &clamp_max_t_o);
	m.impl("channel_shuffle", &channel_shuffle_dev);
	m.impl("_cdist_forward", &cdist_forward);
	m.impl("_pdist_forward", &pdist_forward);
}

} // namespace torch_neuron
