// Data-dependent selection and reducing scatters, on the device:
//  - nonzero (a SCAN of the mask gives each true element its output slot, a
//    SCATTER puts its flat index there; only the count is read to the host),
//    masked_select, masked_scatter, take, put_;
//  - scatter(reduce=), scatter_reduce, index_reduce (SCATTER_ADD / INDEX_ADD with
//    their ISA 1.4 combining functions; "mean" as a sum and a count);
//  - embedding_bag (sum, mean, max; per-sample weights, padding_idx,
//    include_last_offset) and its dense backward, as gathers and index_adds.
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

c10::TensorOptions i64(const Tensor &like) { return like.options().dtype(c10::kLong); }

// The flat (row-major) positions of the true elements of mask, in order.
Tensor flat_true_positions(const Tensor &mask)
{
	const Tensor m = mask.reshape({-1});
	const int64_t n = m.numel();
	Tensor slot = at::empty({n}, i64(m));
	Tensor ones = at::ne(m, 0);
	// slot[i] = number of true elements up to and including i
	at::cumsum_out(slot, ones, 0);
	const int64_t count = n ? slot[n - 1].item<int64_t>() : 0;
	// True elements go to slot - 1, false ones to a spare slot at the end.
	Tensor target = at::where(ones, slot - 1, at::scalar_tensor(count, i64(m)));
	Tensor out = at::empty({count + 1}, i64(m));
	index_write_cmd(NEURON_OP_INDEX_COPY, out, 0, target, at::arange(n, i64(m)));
	return out.narrow(0, 0, count);
}

} // namespace

Tensor device_nonzero(const Tensor &self)
{
	const Tensor flat = flat_true_positions(self);
	const int64_t nd = self.dim(), count = flat.numel();
	Tensor out = at::empty({count, nd}, i64(self));
	// Column d: coordinate d of each position, read from an arange broadcast over
	// the other dims (exact integer arithmetic, no division on the device).
	for (int64_t d = 0; d < nd; ++d) {
		std::vector<int64_t> shape(static_cast<size_t>(nd), 1);
		shape[static_cast<size_t>(d)] = self.size(d);
		const Tensor coord = at::arange(self.size(d), i64(self)).view(shape).expand(self.sizes()).reshape({-1});
		if (count)
			index_select_cmd(out.select(1, d), coord, 0, flat);
	}
	return out;
}

namespace {

// ---- masked_select / masked_scatter / take / put_ ----

Tensor masked_select_f(const Tensor &self, const Tensor &mask)
{
	NEURON_NATIVE("masked_select");
	TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
	auto [s, m] = at::expand_outplace(self, mask);
	if (!chip_ok(*s) || !chip_ok(on_device(*m, self))) {
		note_fallback("masked_select");
		return at::masked_select(self.cpu(), mask.cpu()).to(self.device());
	}
	const Tensor pos = flat_true_positions(on_device(*m, self));
	Tensor out = at::empty({pos.numel()}, self.options());
	if (pos.numel())
		index_select_cmd(out, s->reshape({-1}), 0, pos);
	return out;
}
Tensor &masked_select_o(const Tensor &self, const Tensor &mask, Tensor &out)
{
	return assign_out(out, masked_select_f(self, mask));
}

Tensor masked_scatter_f(const Tensor &self, const Tensor &mask, const Tensor &source)
{
	NEURON_NATIVE("masked_scatter");
	TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
		    mask.scalar_type());
	TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter: expected self and source to have same dtypes but got",
		    self.scalar_type(), " and ", source.scalar_type());
	auto [s, m] = at::expand_outplace(self, mask);
	if (!chip_ok(*s) || !chip_ok(on_device(*m, self)) || !chip_ok(on_device(source, self))) {
		note_fallback("masked_scatter");
		return at::masked_scatter(self.cpu(), mask.cpu(), source.cpu()).to(self.device());
	}
	Tensor out = s->contiguous().clone();
	const Tensor pos = flat_true_positions(on_device(*m, self));
	TORCH_CHECK(pos.numel() <= source.numel(), "masked_scatter: expected source to have at least ", pos.numel(),
		    " elements, it has ", source.numel());
	if (pos.numel())
		index_copy_cmd(out.view({-1}), 0, pos, on_device(source, self).reshape({-1}).narrow(0, 0, pos.numel()).contiguous());
	return out;
}
Tensor &masked_scatter_i(Tensor &self, const Tensor &mask, const Tensor &source)
{
	Tensor r = masked_scatter_f(self, mask, source);
	TORCH_CHECK(r.sizes() == self.sizes(), "masked_scatter_: the mask does not broadcast to self's shape");
	self.copy_(r);
	return self;
}

// Python-style negative indices into n elements, on the device.
Tensor wrap_index(const Tensor &ix, int64_t n)
{
	return at::where(at::lt(ix, 0), ix + n, ix);
}

Tensor take_f(const Tensor &self, const Tensor &index)
{
	NEURON_NATIVE("take");
	TORCH_CHECK(index.scalar_type() == c10::kLong, "take(): Expected a long tensor for index, but got ", index.scalar_type());
	if (!chip_ok(self) || !index_ok(on_device(index, self))) {
		note_fallback("take");
		return at::take(self.cpu(), index.cpu()).to(self.device());
	}
	Tensor out = at::empty(index.sizes(), self.options());
	if (out.numel())
		index_select_cmd(out.view({-1}), self.reshape({-1}), 0, wrap_index(on_device(index, self).reshape({-1}), self.numel()));
	return out;
}
Tensor &take_o(const Tensor &self, const Tensor &index, Tensor &out) { return assign_out(out, take_f(self, index)); }

Tensor &put_i(Tensor &self, const Tensor &index, const Tensor &source, bool accumulate)
{
	NEURON_NATIVE("put_");
	TORCH_CHECK(index.numel() == source.numel(), "put_(): Expected source and index to have the same number of elements");
	if (!chip_ok(self) || !index_ok(on_device(index, self)) || !chip_ok(on_device(source, self)) ||
	    (accumulate && self.scalar_type() == c10::kBool) || !self.is_contiguous()) {
		note_fallback("put_");
		Tensor c = self.cpu();
		c.put_(index.cpu(), source.cpu(), accumulate);
		self.copy_(c);
		return self;
	}
	const Tensor ix = wrap_index(on_device(index, self).reshape({-1}), self.numel());
	const Tensor src = on_device(source, self).reshape({-1}).to(self.scalar_type());
	index_write_cmd(accumulate ? NEURON_OP_INDEX_ADD : NEURON_OP_INDEX_COPY, self.view({-1}), 0, ix, src.contiguous());
	return self;
}

// ---- reducing scatters ----

int64_t reduce_fn(c10::string_view r)
{
	if (r == "sum" || r == "add")
		return NEURON_INDEX_REDUCE_SUM;
	if (r == "prod" || r == "multiply")
		return NEURON_INDEX_REDUCE_PROD;
	if (r == "amax")
		return NEURON_INDEX_REDUCE_AMAX;
	if (r == "amin")
		return NEURON_INDEX_REDUCE_AMIN;
	return -1; // "mean": a sum and a count
}

// The identity a scattered-to element starts from when include_self is false.
Scalar reduce_identity(int64_t fn, c10::ScalarType dt)
{
	switch (fn) {
	case NEURON_INDEX_REDUCE_PROD:
		return 1;
	case NEURON_INDEX_REDUCE_AMAX:
		return at::isFloatingType(dt) ? Scalar(-INFINITY) : Scalar(std::numeric_limits<int64_t>::min());
	case NEURON_INDEX_REDUCE_AMIN:
		return at::isFloatingType(dt) ? Scalar(INFINITY) : Scalar(std::numeric_limits<int64_t>::max());
	default:
		return 0;
	}
}

// out = self, then src reduced into it at index along dim. op: SCATTER_ADD (index
// has src's shape) or INDEX_ADD (1-d index). include_self false: the elements
// that receive something start from the identity (mean: from zero, not counted).
Tensor reduce_into(int op, const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, c10::string_view reduce,
		   bool include_self)
{
	const int64_t fn = reduce_fn(reduce);
	const bool mean = fn < 0;
	const int copy_op = op == NEURON_OP_SCATTER_ADD ? NEURON_OP_SCATTER : NEURON_OP_INDEX_COPY;
	Tensor out = self.contiguous().clone();
	if (index.numel() == 0)
		return out;
	if (!include_self) {
		Tensor ident = at::empty({}, out.options());
		fill_cmd(ident, reduce_identity(mean ? NEURON_INDEX_REDUCE_SUM : fn, out.scalar_type()));
		index_write_cmd(copy_op, out, dim, index, ident.expand(src.sizes()).contiguous());
	}
	index_write_cmd(op, out, dim, index, src, mean ? NEURON_INDEX_REDUCE_SUM : fn);
	if (mean) {
		// count of contributions per element (+1 for self when included)
		Tensor count = at::empty(out.sizes(), out.options());
		fill_cmd(count, include_self ? 1 : 0);
		Tensor ones = at::empty({}, out.options());
		fill_cmd(ones, 1);
		index_write_cmd(op, count, dim, index, ones.expand(src.sizes()).contiguous());
		count = at::clamp_min(count, 1);
		if (at::isFloatingType(out.scalar_type()))
			out.div_(count);
		else
			out = at::div(out, count, "floor");
	}
	return out;
}

bool reduce_ok(const Tensor &self, const Tensor &index, const Tensor &src, c10::string_view reduce)
{
	return chip_ok(self) && index_ok(index) && chip_ok(src) && self.scalar_type() == src.scalar_type() &&
	       self.scalar_type() != c10::kBool && (reduce_fn(reduce) >= 0 || reduce == "mean");
}

Tensor scatter_reduce_two(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, c10::string_view reduce,
			  bool include_self)
{
	NEURON_NATIVE("scatter_reduce");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!reduce_ok(self, on_device(index, self), on_device(src, self), reduce) ||
	    (index.dim() != src.dim() && index.numel() > 0)) {
		note_fallback("scatter_reduce.two");
		return at::scatter_reduce(self.cpu(), dim, index.cpu(), src.cpu(), reduce, include_self).to(self.device());
	}
	const Tensor ix = on_device(index, self);
	const Tensor s = on_device(src, self).as_strided(ix.sizes(), src.strides(), src.storage_offset());
	return reduce_into(NEURON_OP_SCATTER_ADD, self, d, ix, s, reduce, include_self);
}
Tensor &scatter_reduce_two_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src,
			     c10::string_view reduce, bool include_self, Tensor &out)
{
	return assign_out(out, scatter_reduce_two(self, dim, index, src, reduce, include_self));
}
Tensor &scatter_reduce_two_i(Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, c10::string_view reduce,
			     bool include_self)
{
	self.copy_(scatter_reduce_two(self, dim, index, src, reduce, include_self));
	return self;
}

// scatter(reduce="add" | "multiply"): scatter_reduce with include_self.
Tensor scatter_reduce_legacy(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, c10::string_view reduce)
{
	NEURON_NATIVE("scatter");
	TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
	return scatter_reduce_two(self, dim, index, src, reduce, true);
}
Tensor &scatter_reduce_legacy_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src,
				c10::string_view reduce, Tensor &out)
{
	return assign_out(out, scatter_reduce_legacy(self, dim, index, src, reduce));
}
Tensor &scatter_reduce_legacy_i(Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, c10::string_view reduce)
{
	self.copy_(scatter_reduce_legacy(self, dim, index, src, reduce));
	return self;
}
Tensor scatter_value_reduce(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value, c10::string_view reduce)
{
	Tensor v = at::empty({}, self.options());
	fill_cmd(v, value);
	return scatter_reduce_legacy(self, dim, index, v.expand(index.sizes()), reduce);
}
Tensor &scatter_value_reduce_o(const Tensor &self, int64_t dim, const Tensor &index, const Scalar &value,
			       c10::string_view reduce, Tensor &out)
{
	return assign_out(out, scatter_value_reduce(self, dim, index, value, reduce));
}
Tensor &scatter_value_reduce_i(Tensor &self, int64_t dim, const Tensor &index, const Scalar &value, c10::string_view reduce)
{
	self.copy_(scatter_value_reduce(self, dim, index, value, reduce));
	return self;
}

Tensor index_reduce_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, c10::string_view reduce,
		      bool include_self)
{
	NEURON_NATIVE("index_reduce");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
		    "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", std::string(reduce), ".");
	const Tensor ix = on_device(index, self).reshape({-1});
	if (!reduce_ok(self, ix, on_device(source, self), reduce)) {
		note_fallback("index_reduce");
		return at::index_reduce(self.cpu(), dim, index.cpu(), source.cpu(), reduce, include_self).to(self.device());
	}
	if (self.dim() == 0) // one slot: as a 1-d tensor of one element
		return reduce_into(NEURON_OP_INDEX_ADD, self.view({1}), 0, ix, on_device(source, self).reshape({-1}), reduce,
				   include_self)
			.view(c10::IntArrayRef{});
	return reduce_into(NEURON_OP_INDEX_ADD, self, d, ix, on_device(source, self), reduce, include_self);
}
Tensor &index_reduce_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, c10::string_view reduce,
		       bool include_self, Tensor &out)
{
	return assign_out(out, index_reduce_f(self, dim, index, source, reduce, include_self));
}
Tensor &index_reduce_i(Tensor &self, int64_t dim, const Tensor &index, const Tensor &source, c10::string_view reduce,
		       bool include_self)
{
	self.copy_(index_reduce_f(self, dim, index, source, reduce, include_self));
	return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("masked_select", &masked_select_f);
	m.impl("masked_select.out", &masked_select_o);
	m.impl("masked_scatter", &masked_scatter_f);
	m.impl("masked_scatter_", &masked_scatter_i);
	m.impl("take", &take_f);
	m.impl("take.out", &take_o);
	m.impl("put_", &put_i);
	m.impl("scatter_reduce.two", &scatter_reduce_two);
	m.impl("scatter_reduce.two_out", &scatter_reduce_two_o);
	m.impl("scatter_reduce_.two", &scatter_reduce_two_i);
	m.impl("scatter.reduce", &scatter_reduce_legacy);
	m.impl("scatter.reduce_out", &scatter_reduce_legacy_o);
	m.impl("scatter_.reduce", &scatter_reduce_legacy_i);
	m.impl("scatter.value_reduce", &scatter_value_reduce);
	m.impl("scatter.value_reduce_out", &scatter_value_reduce_o);
	m.impl("scatter_.value_reduce", &scatter_value_reduce_i);
	m.impl("index_reduce", &index_reduce_f);
	m.impl("index_reduce.out", &index_reduce_o);
	m.impl("index_reduce_", &index_reduce_i);
}

} // namespace torch_neuron
