// argmax / argmin: one chip ARG_REDUCE command (ISA 1.2) along the dim, or over the
// flattened tensor when no dim is given.
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

Tensor &arg_reduce_out(bool want_min, const Tensor &self, std::optional<int64_t> dim, bool keepdim, Tensor &out)
{
	const char *name = want_min ? "argmin" : "argmax";
	if (!chip_ok(self) || self.scalar_type() == c10::kBool || !chip_ok(out) || out.scalar_type() != c10::kLong) {
		note_fallback(name);
		Tensor r = want_min ? at::argmin(self.cpu(), dim, keepdim) : at::argmax(self.cpu(), dim, keepdim);
		return assign_out(out, r);
	}
	// No dim: the flattened tensor (a view when contiguous, else one device copy).
	const Tensor in = dim ? self : self.reshape({-1});
	const int64_t d = dim ? c10::maybe_wrap_dim(*dim, std::max<int64_t>(self.dim(), 1)) : 0;
	TORCH_CHECK(in.dim() == 0 || in.size(d) > 0, name, "(): Expected reduction dim ", d, " to have non-zero size.");
	std::vector<int64_t> keep(in.sizes().begin(), in.sizes().end());
	if (in.dim() > 0)
		keep[d] = 1;
	Tensor r = at::empty(keep, self.options().dtype(c10::kLong));
	if (r.numel() > 0) {
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_ARG_REDUCE, 2);
		cmd.operands[0] = desc(r);
		cmd.operands[1] = desc(in);
		cmd.iscalars[0] = d;
		cmd.iscalars[1] = want_min ? 1 : 0;
		submit(r, cmd);
	}
	std::vector<int64_t> shape;
	if (!dim) {
		if (keepdim)
			shape.assign(self.dim(), 1);
	} else {
		shape = keep;
		if (!keepdim && self.dim() > 0)
			shape.erase(shape.begin() + d);
	}
	out.resize_(shape);
	out.copy_(r.view(shape));
	return out;
}

Tensor argmax_f(const Tensor &self, std::optional<int64_t> dim, bool keepdim)
{
	NEURON_NATIVE("argmax");
	Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
	return arg_reduce_out(false, self, dim, keepdim, out);
}
Tensor argmin_f(const Tensor &self, std::optional<int64_t> dim, bool keepdim)
{
	NEURON_NATIVE("argmin");
	Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
	return arg_reduce_out(true, self, dim, keepdim, out);
}
Tensor &argmax_o(const Tensor &self, std::optional<int64_t> dim, bool keepdim, Tensor &out)
{
	NEURON_NATIVE("argmax");
	return arg_reduce_out(false, self, dim, keepdim, out);
}
Tensor &argmin_o(const Tensor &self, std::optional<int64_t> dim, bool keepdim, Tensor &out)
{
	NEURON_NATIVE("argmin");
	return arg_reduce_out(true, self, dim, keepdim, out);
}

// max(dim) / min(dim): the values are amax/amin (native reductions), the indices
// one ARG_REDUCE; both take the first NaN of a row, as PyTorch.
std::tuple<Tensor, Tensor> max_min_dim(bool want_min, const Tensor &self, int64_t dim, bool keepdim)
{
	NEURON_NATIVE(want_min ? "min.dim" : "max.dim");
	Tensor values = want_min ? at::amin(self, {dim}, keepdim) : at::amax(self, {dim}, keepdim);
	Tensor indices = at::empty({0}, self.options().dtype(c10::kLong));
	arg_reduce_out(want_min, self, dim, keepdim, indices);
	return {values, indices};
}
std::tuple<Tensor, Tensor> max_dim(const Tensor &self, int64_t dim, bool keepdim) { return max_min_dim(false, self, dim, keepdim); }
std::tuple<Tensor, Tensor> min_dim(const Tensor &self, int64_t dim, bool keepdim) { return max_min_dim(true, self, dim, keepdim); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("argmax", &argmax_f);
	m.impl("argmin", &argmin_f);
	m.impl("argmax.out", &argmax_o);
	m.impl("argmin.out", &argmin_o);
	m.impl("max.dim", &max_dim);
	m.impl("min.dim", &min_dim);
}

} // namespace torch_neuron
