// Scans and sorting on the chip's SCAN and SORT (ISA 1.4): cumsum, cumprod,
// logcumsumexp, cummax/cummin, prod; sort, argsort, topk, kthvalue, median and
// nanmedian; flip and roll (INDEX_SELECT with a reversed / rotated index).
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>

namespace torch_neuron {

namespace {

int64_t wrap_dim(int64_t dim, const Tensor &t) { return c10::maybe_wrap_dim(dim, std::max<int64_t>(t.dim(), 1)); }

// One SCAN command: out = scan(in) along dim, every row starting from `start`.
void scan_cmd(const Tensor &out, const Tensor &in, int64_t dim, int fn, double start)
{
	if (out.numel() == 0)
		return;
	Tensor init = at::empty({}, out.options());
	if (at::isFloatingType(out.scalar_type()))
		fill_cmd(init, start);
	else if (std::isinf(start))
		fill_cmd(init, start > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min());
	else
		fill_cmd(init, static_cast<int64_t>(start));
	std::vector<int64_t> ishape(out.sizes().begin(), out.sizes().end());
	if (out.dim() > 0)
		ishape[dim] = 1;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_SCAN, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(in);
	cmd.operands[2] = desc(init.expand(ishape));
	cmd.iscalars[0] = dim;
	cmd.iscalars[1] = fn;
	submit(out, cmd);
}

bool scan_ok(const Tensor &self, c10::ScalarType out_dt, int fn)
{
	const bool floating = at::isFloatingType(out_dt);
	return chip_ok(self) && chip_dtype(out_dt) != NEURON_DTYPE_INVALID && out_dt != c10::kBool &&
	       (floating || fn != NEURON_SCAN_LOGSUMEXP);
}

// out = scan(self) (out may be self: the scan then runs into a temporary).
Tensor &scan_into(const char *name, int fn, double start, const Tensor &self, int64_t dim, Tensor &out,
		  const std::function<Tensor(const Tensor &)> &cpu)
{
	const int64_t d = wrap_dim(dim, self);
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!scan_ok(self, out.scalar_type(), fn) || !chip_ok(out)) {
		note_fallback(name);
		out.copy_(cpu(self.cpu()));
		return out;
	}
	if (mem_overlap(out, self)) {
		Tensor tmp = at::empty(self.sizes(), out.options());
		scan_cmd(tmp, self, d, fn, start);
		out.copy_(tmp);
	} else {
		scan_cmd(out, self, d, fn, start);
	}
	return out;
}

c10::ScalarType cum_dtype(const Tensor &self, std::optional<c10::ScalarType> dtype)
{
	if (dtype)
		return *dtype;
	return at::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

#define CUM_FAMILY(name, FN, START)                                                                                 \
	Tensor &name##_o(const Tensor &self, int64_t dim, std::optional<c10::ScalarType> dtype, Tensor &out)      \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return scan_into(#name, FN, START, self, dim, out,                                                  \
				 [&](const Tensor &x) { return at::name(x, dim, out.scalar_type()); });            \
	}                                                                                                           \
	Tensor name##_f(const Tensor &self, int64_t dim, std::optional<c10::ScalarType> dtype)                     \
	{                                                                                                           \
		Tensor out = at::empty(self.sizes(), self.options().dtype(cum_dtype(self, dtype)));                 \
		return name##_o(self, dim, dtype, out);                                                             \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self, int64_t dim, std::optional<c10::ScalarType> dtype)                          \
	{                                                                                                           \
		return name##_o(self, dim, dtype, self);                                                            \
	}

CUM_FAMILY(cumsum, NEURON_SCAN_SUM, 0.0)
CUM_FAMILY(cumprod, NEURON_SCAN_PROD, 1.0)

Tensor &logcumsumexp_o(const Tensor &self, int64_t dim, Tensor &out)
{
	NEURON_NATIVE("logcumsumexp");
	return scan_into("logcumsumexp", NEURON_SCAN_LOGSUMEXP, -INFINITY, self, dim, out,
			 [&](const Tensor &x) { return at::logcumsumexp(x, dim); });
}
Tensor logcumsumexp_f(const Tensor &self, int64_t dim)
{
	Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
	return logcumsumexp_o(self, dim, out);
}

// cummax / cummin: the values are a MAX / MIN scan; the index of each is the last
// position p <= j whose element equals the running value (the later one wins ties,
// as PyTorch's kernel), found as a MAX scan over where(x == running, p, -1).
void cum_extremum(const char *name, bool is_max, const Tensor &self, Tensor &values, Tensor &indices, int64_t dim)
{
	const int64_t d = wrap_dim(dim, self);
	if (!scan_ok(self, values.scalar_type(), NEURON_SCAN_MAX) || !chip_ok(values) || !chip_ok(indices) ||
	    values.scalar_type() != self.scalar_type() || indices.scalar_type() != c10::kLong) {
		note_fallback(name);
		auto [v, i] = is_max ? at::cummax(self.cpu(), dim) : at::cummin(self.cpu(), dim);
		values.copy_(v);
		indices.copy_(i);
		return;
	}
	Tensor run = at::empty(self.sizes(), self.options());
	scan_cmd(run, self, d, is_max ? NEURON_SCAN_MAX : NEURON_SCAN_MIN, is_max ? -INFINITY : INFINITY);
	// Positions along the dim, broadcast over the other dims.
	std::vector<int64_t> pshape(std::max<int64_t>(self.dim(), 1), 1);
	const int64_t len = self.dim() ? self.size(d) : 1;
	pshape[self.dim() ? d : 0] = len;
	Tensor pos = at::arange(len, self.options().dtype(c10::kLong)).view(self.dim() ? c10::IntArrayRef(pshape) : c10::IntArrayRef{});
	Tensor eq = at::eq(self, run).logical_or_(at::ne(self, self)); // NaN: the NaN itself
	Tensor cand = at::where(eq, pos.expand(self.sizes()), at::scalar_tensor(-1, pos.options()));
	Tensor idx = at::empty(self.sizes(), indices.options());
	scan_cmd(idx, cand, d, NEURON_SCAN_MAX, -INFINITY);
	values.copy_(run);
	indices.copy_(idx);
}
void cummax_helper(const Tensor &self, Tensor &values, Tensor &indices, int64_t dim)
{
	NEURON_NATIVE("cummax");
	cum_extremum("_cummax_helper", true, self, values, indices, dim);
}
void cummin_helper(const Tensor &self, Tensor &values, Tensor &indices, int64_t dim)
{
	NEURON_NATIVE("cummin");
	cum_extremum("_cummin_helper", false, self, values, indices, dim);
}

// ---- prod: a PROD scan, then the last element of each row ----

Tensor prod_rows(const Tensor &self, int64_t d, c10::ScalarType dt)
{
	Tensor run = at::empty(self.sizes(), self.options().dtype(dt));
	scan_cmd(run, self, d, NEURON_SCAN_PROD, 1.0);
	return run.narrow(d, self.size(d) - 1, 1);
}

Tensor &prod_dim_o(const Tensor &self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype, Tensor &out)
{
	NEURON_NATIVE("prod");
	const int64_t d = wrap_dim(dim, self);
	const c10::ScalarType dt = dtype ? *dtype : cum_dtype(self, std::nullopt);
	std::vector<int64_t> kshape(self.sizes().begin(), self.sizes().end());
	if (self.dim())
		kshape[d] = 1;
	if (!scan_ok(self, dt, NEURON_SCAN_PROD) || !chip_ok(out)) {
		note_fallback("prod");
		return assign_out(out, at::prod(self.cpu(), dim, keepdim, dt));
	}
	Tensor r;
	if (self.dim() == 0) {
		r = self.to(dt);
	} else if (self.size(d) == 0) {
		r = at::ones(kshape, self.options().dtype(dt));
	} else {
		r = prod_rows(self, d, dt);
	}
	if (!keepdim && self.dim())
		r = r.squeeze(d);
	return assign_out(out, r);
}
Tensor prod_dim_f(const Tensor &self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype)
{
	Tensor out = at::empty({0}, self.options().dtype(dtype ? *dtype : cum_dtype(self, std::nullopt)));
	return prod_dim_o(self, dim, keepdim, dtype, out);
}
Tensor prod_all(const Tensor &self, std::optional<c10::ScalarType> dtype)
{
	return prod_dim_f(self.reshape({-1}), 0, false, dtype);
}
Tensor &prod_all_o(const Tensor &self, std::optional<c10::ScalarType> dtype, Tensor &out)
{
	return prod_dim_o(self.reshape({-1}), 0, false, dtype, out);
}

// ---- sorting ----

// SORT into values/indices (k = their extent along dim); false if the chip cannot.
bool sort_cmd(const Tensor &self, int64_t d, bool descending, const Tensor &values, const Tensor &indices)
{
	if (!chip_ok(self) || values.scalar_type() != self.scalar_type() || indices.scalar_type() != c10::kLong)
		return false;
	if (values.numel() == 0)
		return true;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_SORT, 3);
	cmd.operands[0] = desc(values);
	cmd.operands[1] = desc(indices);
	cmd.operands[2] = desc(self);
	cmd.iscalars[0] = d;
	cmd.iscalars[1] = descending ? 1 : 0;
	submit(values, cmd);
	return true;
}

std::tuple<Tensor &, Tensor &> sort_stable_o(const Tensor &self, std::optional<bool> stable, int64_t dim,
					    bool descending, Tensor &values, Tensor &indices)
{
	NEURON_NATIVE("sort");
	const int64_t d = wrap_dim(dim, self);
	// The outputs must not overlap the input: sort into fresh tensors if they do.
	Tensor v = at::empty(self.sizes(), self.options()), i = at::empty(self.sizes(), self.options().dtype(c10::kLong));
	if (!sort_cmd(self, d, descending, v, i)) {
		note_fallback("sort");
		auto [cv, ci] = at::sort(self.cpu(), stable, dim, descending);
		v = cv, i = ci;
	}
	assign_out(values, v);
	assign_out(indices, i);
	return {values, indices};
}
std::tuple<Tensor, Tensor> sort_stable(const Tensor &self, std::optional<bool> stable, int64_t dim, bool descending)
{
	Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(c10::kLong));
	sort_stable_o(self, stable, dim, descending, v, i);
	return {v, i};
}
std::tuple<Tensor, Tensor> sort_f(const Tensor &self, int64_t dim, bool descending)
{
	return sort_stable(self, false, dim, descending);
}
std::tuple<Tensor &, Tensor &> sort_o(const Tensor &self, int64_t dim, bool descending, Tensor &values, Tensor &indices)
{
	return sort_stable_o(self, false, dim, descending, values, indices);
}

std::tuple<Tensor &, Tensor &> topk_o(const Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted,
				     Tensor &values, Tensor &indices)
{
	NEURON_NATIVE("topk");
	const int64_t d = wrap_dim(dim, self);
	const int64_t len = self.dim() ? self.size(d) : 1;
	TORCH_CHECK(k >= 0 && k <= len, "selected index k out of range");
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	if (self.dim())
		shape[d] = k;
	Tensor v = at::empty(shape, self.options()), i = at::empty(shape, self.options().dtype(c10::kLong));
	if (!sort_cmd(self, d, largest, v, i)) {
		note_fallback("topk");
		auto [cv, ci] = at::topk(self.cpu(), k, dim, largest, sorted);
		v = cv, i = ci;
	}
	assign_out(values, v);
	assign_out(indices, i);
	return {values, indices};
}
std::tuple<Tensor, Tensor> topk_f(const Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted)
{
	Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(c10::kLong));
	topk_o(self, k, dim, largest, sorted, v, i);
	return {v, i};
}

// The sorted row's element at position pos (keepdim shape), values and indices.
std::tuple<Tensor, Tensor> pick_sorted(const Tensor &sv, const Tensor &si, int64_t d, const Tensor &pos)
{
	return {at::gather(sv, d, pos), at::gather(si, d, pos)};
}

std::tuple<Tensor &, Tensor &> kthvalue_o(const Tensor &self, int64_t k, int64_t dim, bool keepdim, Tensor &values,
					 Tensor &indices)
{
	NEURON_NATIVE("kthvalue");
	const int64_t d = wrap_dim(dim, self);
	const int64_t len = self.dim() ? self.size(d) : 1;
	TORCH_CHECK(k >= 1 && k <= len, "kthvalue(): selected number k out of range for dimension ", dim);
	if (!chip_ok(self)) {
		note_fallback("kthvalue");
		auto [cv, ci] = at::kthvalue(self.cpu(), k, dim, keepdim);
		assign_out(values, cv);
		assign_out(indices, ci);
		return {values, indices};
	}
	Tensor x = self.dim() ? self : self.reshape({1});
	auto [sv, si] = topk_f(x, k, d, false, true);
	Tensor v = sv.narrow(d, k - 1, 1), i = si.narrow(d, k - 1, 1);
	if (!keepdim || self.dim() == 0)
		v = v.squeeze(d), i = i.squeeze(d);
	assign_out(values, v);
	assign_out(indices, i);
	return {values, indices};
}
std::tuple<Tensor, Tensor> kthvalue_f(const Tensor &self, int64_t k, int64_t dim, bool keepdim)
{
	Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(c10::kLong));
	kthvalue_o(self, k, dim, keepdim, v, i);
	return {v, i};
}

// median: the lower middle of the sorted row, or its first NaN if it has one;
// nanmedian: the lower middle of the row's numbers (NaN only if all are NaN).
std::tuple<Tensor, Tensor> median_impl(const Tensor &self, int64_t dim, bool keepdim, bool ignore_nan)
{
	const int64_t d = wrap_dim(dim, self);
	Tensor x = self.dim() ? self : self.reshape({1});
	TORCH_CHECK(x.size(d) > 0, "median(): Expected reduction dim ", d, " to have non-zero size.");
	auto [sv, si] = sort_f(x, d, false);
	const int64_t n = x.size(d);
	Tensor nans = at::ne(x, x).sum(d, true);                   // NaNs per row (sorted last)
	Tensor numbers = at::rsub(nans, n); // the first NaN's place in the sorted row
	Tensor pos;
	if (ignore_nan) {
		// (numbers - 1) / 2 rounded down, in float (exact for any row length here).
		pos = at::floor(at::clamp_min(numbers - 1, 0).to(c10::kFloat) * 0.5).to(c10::kLong);
	} else {
		const Tensor mid = at::full_like(nans, (n - 1) / 2);
		pos = at::where(at::gt(nans, 0), numbers, mid);
	}
	auto [v, i] = pick_sorted(sv, si, d, pos);
	if (!keepdim || self.dim() == 0)
		v = v.squeeze(d), i = i.squeeze(d);
	return {v, i};
}
std::tuple<Tensor, Tensor> median_dim(const Tensor &self, int64_t dim, bool keepdim)
{
	NEURON_NATIVE("median");
	if (!chip_ok(self)) {
		note_fallback("median.dim");
		auto [v, i] = at::median(self.cpu(), dim, keepdim);
		return {v.to(self.device()), i.to(self.device())};
	}
	return median_impl(self, dim, keepdim, false);
}
std::tuple<Tensor, Tensor> nanmedian_dim(const Tensor &self, int64_t dim, bool keepdim)
{
	NEURON_NATIVE("nanmedian");
	if (!chip_ok(self)) {
		note_fallback("nanmedian.dim");
		auto [v, i] = at::nanmedian(self.cpu(), dim, keepdim);
		return {v.to(self.device()), i.to(self.device())};
	}
	return median_impl(self, dim, keepdim, true);
}
Tensor median_all(const Tensor &self)
{
	NEURON_NATIVE("median");
	if (self.numel() == 0)
		return at::full({}, NAN, self.options());
	return std::get<0>(median_dim(self.reshape({-1}), 0, false));
}
Tensor nanmedian_all(const Tensor &self)
{
	NEURON_NATIVE("nanmedian");
	if (self.numel() == 0)
		return at::full({}, NAN, self.options());
	return std::get<0>(nanmedian_dim(self.reshape({-1}), 0, false));
}

// ---- flip / roll: one INDEX_SELECT per dim, with an index made on the device ----

Tensor flip_f(const Tensor &self, c10::IntArrayRef dims)
{
	NEURON_NATIVE("flip");
	if (!chip_ok(self)) {
		note_fallback("flip");
		return at::flip(self.cpu(), dims).to(self.device());
	}
	Tensor r = self;
	const int64_t nd = std::max<int64_t>(self.dim(), 1);
	std::vector<bool> seen(static_cast<size_t>(nd), false);
	for (int64_t dim : dims) {
		const int64_t d = c10::maybe_wrap_dim(dim, nd);
		TORCH_CHECK(!seen[d], "dim ", d, " appears multiple times in the list of dims");
		seen[d] = true;
		if (self.dim() == 0 || self.size(d) <= 1)
			continue;
		const int64_t n = self.size(d);
		Tensor ix = at::arange(n - 1, -1, -1, self.options().dtype(c10::kLong));
		Tensor out = at::empty(r.sizes(), self.options());
		index_select_cmd(out, r, d, ix);
		r = out;
	}
	return r.is_same(self) ? self.clone() : r;
}

Tensor roll_f(const Tensor &self, c10::IntArrayRef shifts, c10::IntArrayRef dims)
{
	NEURON_NATIVE("roll");
	if (!chip_ok(self) || self.numel() == 0) {
		if (self.numel() == 0)
			return self.clone();
		note_fallback("roll");
		return at::roll(self.cpu(), shifts, dims).to(self.device());
	}
	if (dims.empty()) {
		TORCH_CHECK(shifts.size() == 1, "`shifts` required");
		return roll_f(self.reshape({-1}), shifts, {0}).view(self.sizes());
	}
	TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
		    ", dims:", dims.size());
	Tensor r = self;
	for (size_t k = 0; k < dims.size(); ++k) {
		const int64_t d = c10::maybe_wrap_dim(dims[k], self.dim());
		const int64_t n = self.size(d);
		const int64_t s = ((shifts[k] % n) + n) % n;
		if (s == 0)
			continue;
		// out[j] = in[(j - s) mod n]: n - s .. n - 1, then 0 .. n - s - 1
		const auto i64 = self.options().dtype(c10::kLong);
		Tensor ix = at::cat({at::arange(n - s, n, i64), at::arange(0, n - s, i64)});
		Tensor out = at::empty(r.sizes(), self.options());
		index_select_cmd(out, r, d, ix);
		r = out;
	}
	return r.is_same(self) ? self.clone() : r;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("cumsum", &cumsum_f);
	m.impl("cumsum_", &cumsum_i);
	m.impl("cumsum.out", &cumsum_o);
	m.impl("cumprod", &cumprod_f);
	m.impl("cumprod_", &cumprod_i);
	m.impl("cumprod.out", &cumprod_o);
	m.impl("logcumsumexp", &logcumsumexp_f);
	m.impl("logcumsumexp.out", &logcumsumexp_o);
	m.impl("_cummax_helper", &cummax_helper);
	m.impl("_cummin_helper", &cummin_helper);
	m.impl("prod", &prod_all);
	m.impl("prod.out", &prod_all_o);
	m.impl("prod.dim_int", &prod_dim_f);
	m.impl("prod.int_out", &prod_dim_o);
	m.impl("sort", &sort_f);
	m.impl("sort.values", &sort_o);
	m.impl("sort.stable", &sort_stable);
	m.impl("sort.values_stable", &sort_stable_o);
	m.impl("topk", &topk_f);
	m.impl("topk.values", &topk_o);
	m.impl("kthvalue", &kthvalue_f);
	m.impl("kthvalue.values", &kthvalue_o);
	m.impl("median", &median_all);
	m.impl("median.dim", &median_dim);
	m.impl("nanmedian", &nanmedian_all);
	m.impl("nanmedian.dim", &nanmedian_dim);
	m.impl("flip", &flip_f);
	m.impl("roll", &roll_f);
}

} // namespace torch_neuron
