// Reductions composed of the chip's SUM / MEAN / AMAX: vector norms (any order), var/std,
// amin/min, all/any.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// ---- norms and variance ----

Tensor vector_norm(const Tensor &self_in, const Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
		   std::optional<c10::ScalarType> dtype)
{
	NEURON_NATIVE("linalg_vector_norm");
	const double o = ord.toDouble();
	if (!float_dev(self_in) || (dtype && (!at::isFloatingType(*dtype) || chip_dtype(*dtype) == NEURON_DTYPE_INVALID))) {
		note_fallback("linalg_vector_norm");
		return at::linalg_vector_norm(self_in.cpu(), ord, dim, keepdim, dtype).to(self_in.device());
	}
	const Tensor self = dtype && *dtype != self_in.scalar_type() ? self_in.to(*dtype) : self_in;
	const int64_t mask = dim_mask(self, dim);
	if (o != 2.0 && o != 1.0) { // inf, -inf, 0 and other p composed of native ops
		std::vector<int64_t> dv;
		for (int64_t i = 0; i < self.dim(); ++i)
			if ((mask >> i) & 1)
				dv.push_back(i);
		const Tensor a = at::abs(self);
		Tensor r;
		if (std::isinf(o))
			r = o > 0 ? at::amax(a, dv, keepdim) : at::amin(a, dv, keepdim);
		else if (o == 0)
			r = at::sum(a != 0, dv, keepdim, self.scalar_type());
		else
			r = at::pow(at::sum(at::pow(a, o), dv, keepdim), 1.0 / o);
		return r;
	}
	Tensor t = at::empty(self.sizes(), self.options());
	if (o == 2.0)
		binary_op(NEURON_OP_MUL, t, self, self);
	else
		math_cmd(t, self, NEURON_UNARY_ABS);
	Tensor r = at::empty(keep_shape(self, mask), self.options());
	reduce_cmd(NEURON_OP_SUM, r, t, mask);
	if (o == 2.0)
		math_cmd(r, r, NEURON_UNARY_SQRT);
	return keepdim ? r : r.view(drop_shape(self, mask));
}

Tensor var_impl(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &correction, bool keepdim,
		bool take_sqrt)
{
	const int64_t mask = dim_mask(self, dim);
	int64_t n = 1;
	for (int64_t i = 0; i < self.dim(); ++i)
		if ((mask >> i) & 1)
			n *= self.size(i);
	const double corr = correction ? correction->toDouble() : 1.0;
	Tensor mean = at::empty(keep_shape(self, mask), self.options());
	reduce_cmd(NEURON_OP_MEAN, mean, self, mask);
	Tensor xc = at::empty(self.sizes(), self.options());
	binary_op(NEURON_OP_SUB, xc, self, mean);
	binary_op(NEURON_OP_MUL, xc, xc, xc);
	Tensor r = at::empty(keep_shape(self, mask), self.options());
	reduce_cmd(NEURON_OP_SUM, r, xc, mask);
	scalar_op(NEURON_OP_DIV_SCALAR, r, r, std::max(0.0, static_cast<double>(n) - corr));
	if (take_sqrt)
		math_cmd(r, r, NEURON_UNARY_SQRT);
	return keepdim ? r : r.view(drop_shape(self, mask));
}
Tensor var_c(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &corr, bool keepdim)
{
	NEURON_NATIVE("var");
	if (!float_dev(self)) {
		note_fallback("var");
		return at::var(self.cpu(), dim, corr, keepdim).to(self.device());
	}
	return var_impl(self, dim, corr, keepdim, false);
}
Tensor std_c(const Tensor &self, at::OptionalIntArrayRef dim, const std::optional<Scalar> &corr, bool keepdim)
{
	NEURON_NATIVE("std");
	if (!float_dev(self)) {
		note_fallback("std");
		return at::std(self.cpu(), dim, corr, keepdim).to(self.device());
	}
	return var_impl(self, dim, corr, keepdim, true);
}

// all(x) = (count of zeros == 0); any(x) = (count of non-zeros != 0)
Tensor &all_any_o(bool all, const Tensor &self, Tensor &out)
{
	NEURON_NATIVE(all ? "all" : "any");
	if (out.dim() != 0)
		out.resize_({});
	if (!chip_ok(self) || out.scalar_type() != c10::kBool) {
		note_fallback(all ? "all" : "any");
		out.copy_(all ? at::all(self.cpu()) : at::any(self.cpu()));
		return out;
	}
	if (self.numel() == 0) {
		fill_cmd(out, all);
		return out;
	}
	Tensor hits = at::empty(self.sizes(), self.options().dtype(c10::kBool));
	cmp_scalar_cmd(hits, self, all ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	Tensor n = at::empty(std::vector<int64_t>(self.dim(), 1), self.options().dtype(c10::kLong));
	reduce_cmd(NEURON_OP_SUM, n, hits, dim_mask(self, std::nullopt));
	cmp_scalar_cmd(out, n.view(c10::IntArrayRef{}), all ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	return out;
}
Tensor all_f(const Tensor &self) { Tensor o = at::empty({}, self.options().dtype(c10::kBool)); return all_any_o(true, self, o); }
Tensor any_f(const Tensor &self) { Tensor o = at::empty({}, self.options().dtype(c10::kBool)); return all_any_o(false, self, o); }
Tensor &all_o(const Tensor &self, Tensor &o) { return all_any_o(true, self, o); }
Tensor &any_o(const Tensor &self, Tensor &o) { return all_any_o(false, self, o); }

Tensor &all_any_dim_o(bool all, const Tensor &self, int64_t dim, bool keepdim, Tensor &out)
{
	NEURON_NATIVE(all ? "all" : "any");
	const int64_t mask = dim_mask(self, c10::IntArrayRef{dim});
	const auto shape = keepdim ? keep_shape(self, mask) : drop_shape(self, mask);
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (chip_ok(self) && out.scalar_type() == c10::kBool && (self.dim() == 0 || self.numel() == 0)) {
		// One element (0-d) is its own truth value; an empty dim is all true / none true.
		if (self.dim() == 0)
			cmp_scalar_cmd(out, self, NEURON_CMP_NE, 0.0);
		else
			fill_cmd(out, all);
		return out;
	}
	if (!chip_ok(self) || out.scalar_type() != c10::kBool) {
		note_fallback(all ? "all" : "any");
		out.copy_(all ? at::all(self.cpu(), dim, keepdim) : at::any(self.cpu(), dim, keepdim));
		return out;
	}
	Tensor hits = at::empty(self.sizes(), self.options().dtype(c10::kBool));
	cmp_scalar_cmd(hits, self, all ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	Tensor n = at::empty(keep_shape(self, mask), self.options().dtype(c10::kLong));
	reduce_cmd(NEURON_OP_SUM, n, hits, mask);
	Tensor target = out.is_contiguous() ? out.view(keep_shape(self, mask)) : at::empty(keep_shape(self, mask), out.options());
	cmp_scalar_cmd(target, n, all ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	if (target.data_ptr() != out.data_ptr())
		out.copy_(target.view(shape));
	return out;
}
Tensor &all_dim_o(const Tensor &self, int64_t dim, bool keepdim, Tensor &o) { return all_any_dim_o(true, self, dim, keepdim, o); }
Tensor &any_dim_o(const Tensor &self, int64_t dim, bool keepdim, Tensor &o) { return all_any_dim_o(false, self, dim, keepdim, o); }

Tensor amin_f(const Tensor &self, c10::IntArrayRef dims, bool keepdim)
{
	NEURON_NATIVE("amin");
	if (!chip_ok(self) || self.scalar_type() == c10::kBool || self.numel() == 0) {
		note_fallback("amin");
		return at::amin(self.cpu(), dims, keepdim).to(self.device());
	}
	Tensor neg = at::empty(self.sizes(), self.options());
	scalar_op(NEURON_OP_MUL_SCALAR, neg, self, -1);
	const int64_t mask = dim_mask(self, dims);
	Tensor r = at::empty(keep_shape(self, mask), self.options());
	reduce_cmd(NEURON_OP_AMAX, r, neg, mask);
	scalar_op(NEURON_OP_MUL_SCALAR, r, r, -1);
	return keepdim ? r : r.view(drop_shape(self, mask));
}
Tensor min_all(const Tensor &self)
{
	TORCH_CHECK(self.numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0.");
	return amin_f(self, {}, false);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("all", &all_f);
	m.impl("any", &any_f);
	m.impl("all.all_out", &all_o);
	m.impl("any.all_out", &any_o);
	m.impl("amin", &amin_f);
	m.impl("min", &min_all);
	m.impl("all.out", &all_dim_o);
	m.impl("any.out", &any_dim_o);
	m.impl("linalg_vector_norm", &vector_norm);
	m.impl("var.correction", &var_c);
	m.impl("std.correction", &std_c);
}

} // namespace torch_neuron
