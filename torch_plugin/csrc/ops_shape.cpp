// cat (one COPY per input into its slice of the output) and arange.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// cat: one COPY per input into its slice of the output.
Tensor &cat_o(const at::ITensorListRef &tensors, int64_t dim, Tensor &out)
{
	NEURON_NATIVE("cat");
	std::vector<Tensor> ts;
	for (const Tensor &t : tensors)
		ts.push_back(t);
	TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
	// Legacy rule: 1-d empty tensors are skipped.
	const Tensor *ref = nullptr;
	for (const Tensor &t : ts)
		if (!(t.dim() == 1 && t.numel() == 0)) {
			ref = &t;
			break;
		}
	if (!ref) {
		out.resize_({0});
		return out;
	}
	const int64_t d = c10::maybe_wrap_dim(dim, ref->dim());
	std::vector<int64_t> shape(ref->sizes().begin(), ref->sizes().end());
	int64_t total = 0;
	c10::ScalarType dt = ref->scalar_type();
	for (const Tensor &t : ts) {
		if (t.dim() == 1 && t.numel() == 0)
			continue;
		TORCH_CHECK(t.dim() == ref->dim(), "torch.cat(): tensors must have the same number of dimensions");
		for (int64_t i = 0; i < t.dim(); ++i)
			TORCH_CHECK(i == d || t.size(i) == ref->size(i), "torch.cat(): Sizes of tensors must match except in dimension ",
				    d, ". Expected size ", ref->size(i), " but got size ", t.size(i), " for tensor in the list.");
		total += t.size(d);
		dt = c10::promoteTypes(dt, t.scalar_type());
	}
	shape[d] = total;
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	int64_t off = 0;
	for (const Tensor &t : ts) {
		if (t.dim() == 1 && t.numel() == 0)
			continue;
		out.narrow(d, off, t.size(d)).copy_(t);
		off += t.size(d);
	}
	return out;
}
Tensor cat_f(const at::ITensorListRef &tensors, int64_t dim)
{
	c10::ScalarType dt = c10::ScalarType::Undefined;
	c10::Device dev(c10::DeviceType::PrivateUse1, current_device());
	bool first = true;
	for (const Tensor &t : tensors) {
		dt = first ? t.scalar_type() : c10::promoteTypes(dt, t.scalar_type());
		if (first && t.device().is_privateuseone())
			dev = t.device();
		first = false;
	}
	Tensor out = at::empty({0}, at::TensorOptions().dtype(dt).device(dev));
	return cat_o(tensors, dim, out);
}

// arange: computed on the host (a factory; no input to read), then one copy.
Tensor &arange_o(const Scalar &start, const Scalar &end, const Scalar &step, Tensor &out)
{
	NEURON_NATIVE("arange");
	Tensor h = at::arange(start, end, step, out.options().device(c10::kCPU));
	if (out.sizes() != h.sizes())
		out.resize_(h.sizes());
	out.copy_(h);
	return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("cat", &cat_f);
	m.impl("cat.out", &cat_o);
	m.impl("arange.start_out", &arange_o);
}

} // namespace torch_neuron
