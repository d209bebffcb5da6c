// Reductions, searches and counting composed of native ops: logsumexp, var_mean /
// std_mean, aminmax, count_nonzero, nansum, renorm, isin, searchsorted /
// bucketize, histc, bincount, repeat_interleave with a tensor of repeats,
// nonzero_static, equal, unique / unique_consecutive (sort, compare, select).
// Data-dependent sizes read one count to the host, as CUDA does.
#include "compose.h"

#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

std::vector<int64_t> dims_of(const Tensor &x, at::OptionalIntArrayRef dim)
{
	std::vector<int64_t> d;
	if (dim && !dim->empty())
		for (int64_t v : *dim)
			d.push_back(c10::maybe_wrap_dim(v, std::max<int64_t>(x.dim(), 1)));
	else
		for (int64_t i = 0; i < x.dim(); ++i)
			d.push_back(i);
	return d;
}

Tensor &logsumexp_o(const Tensor &x, c10::IntArrayRef dim, bool keepdim, Tensor &out)
{
	NEURON_NATIVE("logsumexp");
	if (!floats_on_device({&x}))
		return note_fallback("logsumexp"), assign_out(out, at::logsumexp(x.cpu(), dim, keepdim));
	if (x.numel() == 0)
		return assign_out(out, at::log(at::sum(at::exp(x), dim, keepdim)));
	// log(sum(exp(x - m))) + m, with m = the max (0 where it is infinite)
	Tensor m = at::amax(x, dim, true);
	m = at::where(at::isinf(m), 0.0, m);
	Tensor r = at::log(at::sum(at::exp(x - m), dim, true)) + m;
	if (!keepdim)
		r = r.squeeze(dims_of(x, dim));
	return assign_out(out, r);
}

std::tuple<Tensor, Tensor> var_mean_c(const Tensor &x, at::OptionalIntArrayRef dim, const std::optional<Scalar> &corr,
				      bool keepdim)
{
	NEURON_NATIVE("var_mean");
	if (!floats_on_device({&x})) {
		note_fallback("var_mean.correction");
		auto [v, m] = at::var_mean(x.cpu(), dim, corr, keepdim);
		return {to_dev(v, x), to_dev(m, x)};
	}
	return {at::var(x, dim, corr, keepdim), at::mean(x, dim, keepdim)};
}
std::tuple<Tensor, Tensor> std_mean_c(const Tensor &x, at::OptionalIntArrayRef dim, const std::optional<Scalar> &corr,
				      bool keepdim)
{
	NEURON_NATIVE("std_mean");
	if (!floats_on_device({&x})) {
		note_fallback("std_mean.correction");
		auto [v, m] = at::std_mean(x.cpu(), dim, corr, keepdim);
		return {to_dev(v, x), to_dev(m, x)};
	}
	return {at::std(x, dim, corr, keepdim), at::mean(x, dim, keepdim)};
}

std::tuple<Tensor, Tensor> aminmax_dev(const Tensor &x, std::optional<int64_t> dim, bool keepdim)
{
	NEURON_NATIVE("aminmax");
	if (!all_on_device({&x}) || x.scalar_type() == c10::kBool) {
		note_fallback("aminmax");
		auto [a, b] = at::aminmax(x.cpu(), dim, keepdim);
		return {to_dev(a, x), to_dev(b, x)};
	}
	TORCH_CHECK(x.numel() > 0 || dim, "aminmax(): cannot compute aminmax over an empty dimension as the operation has "
					 "no identity.");
	if (!dim) {
		const Tensor f = x.reshape({-1});
		Tensor lo = at::amin(f, 0), hi = at::amax(f, 0);
		if (keepdim && x.dim()) {
			std::vector<int64_t> ones(static_cast<size_t>(x.dim()), 1);
			lo = lo.view(ones), hi = hi.view(ones);
		}
		return {lo, hi};
	}
	return {at::amin(x, *dim, keepdim), at::amax(x, *dim, keepdim)};
}
std::tuple<Tensor &, Tensor &> aminmax_o(const Tensor &x, std::optional<int64_t> dim, bool keepdim, Tensor &lo, Tensor &hi)
{
	auto [a, b] = aminmax_dev(x, dim, keepdim);
	assign_out(lo, a);
	assign_out(hi, b);
	return {lo, hi};
}

Tensor count_nonzero_dev(const Tensor &x, c10::IntArrayRef dim)
{
	NEURON_NATIVE("count_nonzero");
	if (!all_on_device({&x}))
		return note_fallback("count_nonzero"), to_dev(at::count_nonzero(x.cpu(), dim), x);
	return at::sum(x != 0, dim, false, c10::kLong);
}

Tensor &nansum_o(const Tensor &x, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype, Tensor &out)
{
	NEURON_NATIVE("nansum");
	if (!all_on_device({&x}))
		return note_fallback("nansum"), assign_out(out, at::nansum(x.cpu(), dim, keepdim, dtype));
	const Tensor clean = at::isFloatingType(x.scalar_type()) ? at::where(at::isnan(x), 0.0, x).to(x.scalar_type()) : x;
	return assign_out(out, at::sum(clean, dim, keepdim, dtype));
}
Tensor nansum_dev(const Tensor &x, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype)
{
	Tensor out = at::empty({0}, x.options());
	return nansum_o(x, dim, keepdim, dtype, out);
}

// Sub-tensors along dim whose p-norm exceeds maxnorm are scaled down to it.
Tensor &renorm_o(const Tensor &x, const Scalar &p, int64_t dim, const Scalar &maxnorm, Tensor &out)
{
	NEURON_NATIVE("renorm");
	if (!floats_on_device({&x}))
		return note_fallback("renorm"), assign_out(out, at::renorm(x.cpu(), p, dim, maxnorm));
	const int64_t d = c10::maybe_wrap_dim(dim, x.dim());
	std::vector<int64_t> others;
	for (int64_t i = 0; i < x.dim(); ++i)
		if (i != d)
			others.push_back(i);
	const Tensor norm = at::linalg_vector_norm(x, p, others, true);
	const double mx = maxnorm.toDouble();
	const Tensor factor = at::where(norm > mx, mx / (norm + 1e-7), 1.0).to(x.scalar_type());
	return assign_out(out, x * factor);
}
Tensor renorm_dev(const Tensor &x, const Scalar &p, int64_t dim, const Scalar &maxnorm)
{
	Tensor out = at::empty({0}, x.options());
	return renorm_o(x, p, dim, maxnorm, out);
}

// elements[..] in test (all pairs compared: fine for the sizes isin sees).
Tensor &isin_o(const Tensor &el, const Tensor &test, bool, bool invert, Tensor &out)
{
	NEURON_NATIVE("isin");
	if (!all_on_device({&el, &test}))
		return note_fallback("isin"), assign_out(out, at::isin(el.cpu(), test.cpu(), false, invert));
	Tensor r = test.numel() == 0 ? at::zeros(el.sizes(), el.options().dtype(c10::kBool))
				     : at::any(el.unsqueeze(-1) == test.reshape({-1}), -1);
	return assign_out(out, invert ? at::logical_not(r) : r);
}
Tensor isin_dev(const Tensor &el, const Tensor &test, bool assume_unique, bool invert)
{
	Tensor out = at::empty({0}, el.options().dtype(c10::kBool));
	return isin_o(el, test, assume_unique, invert, out);
}
Tensor isin_ts(const Tensor &el, const Scalar &t, bool u, bool invert)
{
	Tensor tt = at::empty({1}, el.options());
	fill_cmd(tt, t);
	return isin_dev(el, tt, u, invert);
}

// searchsorted: the count of sorted entries below the value (<= it with right).
Tensor searchsorted_impl(const Tensor &sorted, const Tensor &values, bool out_int32, bool right,
			 const std::optional<Tensor> &sorter)
{
	Tensor s = sorted;
	if (sorter && sorter->defined())
		s = at::gather(sorted, -1, *sorter);
	Tensor hit;
	if (s.dim() == 1) {
		hit = right ? (s <= values.unsqueeze(-1)) : (s < values.unsqueeze(-1));
	} else { // one sorted row per leading index of values
		hit = right ? (s.unsqueeze(-2) <= values.unsqueeze(-1)) : (s.unsqueeze(-2) < values.unsqueeze(-1));
	}
	return at::sum(hit, -1, false, out_int32 ? c10::kInt : c10::kLong);
}
Tensor searchsorted_t(const Tensor &sorted, const Tensor &values, bool out_int32, bool right,
		      std::optional<c10::string_view> side, const std::optional<Tensor> &sorter)
{
	NEURON_NATIVE("searchsorted");
	const bool r = side ? *side == "right" : right;
	const Tensor so = sorter ? *sorter : Tensor();
	if (!all_on_device({&sorted, &values, &so}) || (sorted.dim() > 1 && sorted.dim() != values.dim()))
		return note_fallback("searchsorted"),
		       to_dev(at::searchsorted(sorted.cpu(), values.cpu(), out_int32, right, side, cpu_opt(sorter)), sorted);
	return searchsorted_impl(sorted, values, out_int32, r, sorter);
}
Tensor searchsorted_s(const Tensor &sorted, const Scalar &value, bool out_int32, bool right,
		      std::optional<c10::string_view> side, const std::optional<Tensor> &sorter)
{
	Tensor v = at::empty({}, sorted.options());
	fill_cmd(v, value);
	return searchsorted_t(sorted, v, out_int32, right, side, sorter);
}
Tensor bucketize_t(const Tensor &x, const Tensor &boundaries, bool out_int32, bool right)
{
	NEURON_NATIVE("bucketize");
	TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
	return searchsorted_t(boundaries, x, out_int32, right, std::nullopt, std::nullopt);
}
Tensor &bucketize_to(const Tensor &x, const Tensor &b, bool i32, bool right, Tensor &out)
{
	return assign_out(out, bucketize_t(x, b, i32, right));
}

// histc: bins of equal width over [min, max] (the data's range when both are 0).
Tensor &histc_o(const Tensor &x, int64_t bins, const Scalar &min, const Scalar &max, Tensor &out)
{
	NEURON_NATIVE("histc");
	TORCH_CHECK(bins > 0, "torch.histc_dev(): bins must be > 0, but got ", bins, " for bins");
	if (!floats_on_device({&x}))
		return note_fallback("histc"), assign_out(out, at::histc(x.cpu(), bins, min, max));
	double lo = min.toDouble(), hi = max.toDouble();
	if (lo == hi && x.numel() > 0) { // the data's range: two scalars read to the host
		lo = x.min().item<double>();
		hi = x.max().item<double>();
	}
	if (lo == hi)
		lo -= 1, hi += 1;
	TORCH_CHECK(lo < hi, "torch.histc_dev(): max must be larger than min");
	const Tensor f = x.reshape({-1});
	const Tensor inside = (f >= lo).logical_and_(f <= hi);
	Tensor bin = at::floor((f - lo) * (static_cast<double>(bins) / (hi - lo))).to(c10::kLong);
	bin = at::where(bin == bins, bins - 1, bin); // the right edge belongs to the last bin
	bin = at::where(inside, bin, bins);          // outside: a spare bin, dropped
	Tensor h = at::zeros({bins + 1}, x.options()).index_add_(0, bin, at::ones_like(f));
	return assign_out(out, h.narrow(0, 0, bins));
}
Tensor histc_dev(const Tensor &x, int64_t bins, const Scalar &min, const Scalar &max)
{
	Tensor out = at::empty({0}, x.options());
	return histc_o(x, bins, min, max, out);
}

Tensor bincount_dev(const Tensor &x, const std::optional<Tensor> &weights, int64_t minlength)
{
	NEURON_NATIVE("bincount");
	const Tensor w = weights ? *weights : Tensor();
	if (!all_on_device({&x, &w}) || x.dim() != 1 || !index_ok(x))
		return note_fallback("bincount"), to_dev(at::bincount(x.cpu(), cpu_opt(weights), minlength), x);
	TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
	const int64_t n = x.numel() ? std::max(x.max().item<int64_t>() + 1, minlength) : minlength;
	if (x.numel())
		TORCH_CHECK(x.min().item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
	const auto dt = w.defined() ? (w.scalar_type() == c10::kFloat ? c10::kFloat : c10::kDouble) : c10::kLong;
	Tensor src = w.defined() ? w.to(dt) : at::ones({x.numel()}, x.options().dtype(c10::kLong));
	return at::zeros({n}, x.options().dtype(dt)).index_add_(0, x.to(c10::kLong), src);
}

// repeat_interleave(repeats): index j repeated repeats[j] times.
Tensor repeat_interleave_t(const Tensor &repeats, std::optional<int64_t> output_size)
{
	NEURON_NATIVE("repeat_interleave");
	if (!index_ok(repeats) || repeats.dim() != 1)
		return note_fallback("repeat_interleave.Tensor"),
		       to_dev(at::repeat_interleave(repeats.cpu(), output_size), repeats);
	const Tensor r = repeats.to(c10::kLong);
	const Tensor ends = at::cumsum(r, 0);
	const int64_t total = output_size ? *output_size : (r.numel() ? ends[-1].item<int64_t>() : 0);
	// position p takes the index of the first j with ends[j] > p
	const Tensor pos = at::arange(total, r.options());
	return at::searchsorted(ends, pos, false, true);
}

Tensor nonzero_static_dev(const Tensor &x, int64_t size, int64_t fill_value)
{
	NEURON_NATIVE("nonzero_static");
	if (!all_on_device({&x}))
		return note_fallback("nonzero_static"), to_dev(at::nonzero_static(x.cpu(), size, fill_value), x);
	Tensor nz = at::nonzero(x);
	const int64_t n = nz.size(0);
	if (n >= size)
		return nz.narrow(0, 0, size).contiguous();
	return at::cat({nz, at::full({size - n, nz.size(1)}, fill_value, nz.options())}, 0);
}

bool equal_dev(const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("equal");
	if (a.sizes() != b.sizes())
		return false;
	if (!all_on_device({&a, &b}))
		return note_fallback("equal"), at::equal(a.cpu(), b.cpu());
	return a.numel() == 0 || at::all(a == b).item<bool>();
}

// unique (sorted) and unique_consecutive: first elements of runs of equal values.
std::tuple<Tensor, Tensor, Tensor> unique_runs(const Tensor &v, const Tensor &order, bool inverse, bool counts)
{
	const int64_t n = v.numel();
	if (n == 0)
		return {v, at::empty({0}, v.options().dtype(c10::kLong)), at::empty({0}, v.options().dtype(c10::kLong))};
	Tensor starts = at::ones({n}, v.options().dtype(c10::kBool));
	if (n > 1)
		starts.narrow(0, 1, n - 1).copy_(v.narrow(0, 1, n - 1) != v.narrow(0, 0, n - 1));
	const Tensor values = at::masked_select(v, starts);
	Tensor inv, cnt;
	const Tensor run = at::cumsum(starts, 0) - 1; // the run of each sorted element
	if (inverse)
		inv = order.defined() ? at::empty({n}, run.options()).index_copy_(0, order, run) : run;
	if (counts)
		cnt = at::zeros({values.numel()}, run.options()).index_add_(0, run, at::ones_like(run));
	return {values, inv.defined() ? inv : at::empty({0}, run.options()), cnt.defined() ? cnt : at::empty({0}, run.options())};
}
std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor &x, bool sorted, bool return_inverse, bool return_counts)
{
	NEURON_NATIVE("_unique2");
	if (!all_on_device({&x}) || x.scalar_type() == c10::kBool) {
		note_fallback("_unique2");
		auto [a, b, c] = at::_unique2(x.cpu(), sorted, return_inverse, return_counts);
		return {to_dev(a, x), to_dev(b, x), to_dev(c, x)};
	}
	auto [sv, si] = at::sort(x.reshape({-1}));
	auto [vals, inv, cnt] = unique_runs(sv, si, return_inverse, return_counts);
	if (return_inverse)
		inv = inv.view(x.sizes());
	return {vals, inv, cnt};
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive_dev(const Tensor &x, bool return_inverse, bool return_counts,
						      std::optional<int64_t> dim)
{
	NEURON_NATIVE("unique_consecutive");
	if (!all_on_device({&x}) || dim || x.scalar_type() == c10::kBool) {
		note_fallback("unique_consecutive");
		auto [a, b, c] = at::unique_consecutive(x.cpu(), return_inverse, return_counts, dim);
		return {to_dev(a, x), to_dev(b, x), to_dev(c, x)};
	}
	auto [vals, inv, cnt] = unique_runs(x.reshape({-1}), Tensor(), return_inverse, return_counts);
	if (return_inverse)
		inv = inv.view(x.sizes());
	return {vals, inv, cnt};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("logsumexp.out", &logsumexp_o);
	m.impl("var_mean.correction", &var_mean_c);
	m.impl("std_mean.correction", &std_mean_c);
	m.impl("aminmax", &aminmax_dev);
	m.impl("aminmax.out", &aminmax_o);
	m.impl("count_nonzero.dim_IntList", &count_nonzero_dev);
	m.impl("nansum", &nansum_dev);
	m.impl("nansum.out", &nansum_o);
	m.impl("renorm", &renorm_dev);
	m.impl("renorm.out", &renorm_o);
	m.impl("isin.Tensor_Tensor", &isin_dev);
	m.impl("isin.Tensor_Tensor_out", &isin_o);
	m.impl("isin.Tensor_Scalar", &isin_ts);
	m.impl("searchsorted.Tensor", &searchsorted_t);
	m.impl("searchsorted.Scalar", &searchsorted_s);
	m.impl("bucketize.Tensor", &bucketize_t);
	m.impl("bucketize.Tensor_out", &bucketize_to);
	m.impl("histc", &histc_dev);
	m.impl("histc.out", &histc_o);
	m.impl("bincount", &bincount_dev);
	m.impl("repeat_interleave.Tensor", &repeat_interleave_t);
	m.impl("nonzero_static", &nonzero_static_dev);
	m.impl("equal", &equal_dev);
	m.impl("_unique2", &unique2);
	m.impl("unique_consecutive", &unique_consecutive_dev);
}

} // namespace torch_neuron
