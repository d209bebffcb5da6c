// What the device does not support raises a clear error from every entry point,
// instead of failing somewhere deep inside (or crashing):
//  - sparse layouts (COO, CSR, CSC, BSR, BSC): a fallback on the sparse dispatch
//    keys of the device, and the dense-to-sparse conversions of device tensors;
//  - the strided nested tensor (torch.nested with layout=torch.strided): a
//    fallback on its key. (The jagged layout is a tensor subclass over ordinary
//    device tensors and runs its ops through them.)
// Complex tensors are supported: they live on the device (copies move their bytes,
// conjugate and negative views included: ops_core.cpp, and the fallthroughs
// below) and their arithmetic runs through the counted CPU fallback.
#include "cmds.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

std::string op_name(const c10::OperatorHandle &op)
{
	const auto &s = op.schema();
	return s.name() + (s.overload_name().empty() ? "" : "." + s.overload_name());
}

[[noreturn]] void sparse_unsupported(const c10::OperatorHandle &op, torch::jit::Stack *)
{
	TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: sparse tensors are not supported on the 'neuron' device (", op_name(op),
				    " was called with one). Keep sparse tensors on the CPU, or call .to_dense() before "
				    "moving them to 'neuron'.");
}

[[noreturn]] void nested_unsupported(const c10::OperatorHandle &op, torch::jit::Stack *)
{
	TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: nested tensors with layout=torch.strided are not supported on the "
					   "'neuron' device (",
				    op_name(op), " was called with one). Use torch.nested with layout=torch.jagged, or "
						 "padded dense tensors.");
}

// x.to_sparse*() of a device tensor: refused before any work is done.
Tensor to_sparse_refused(const Tensor &self)
{
	TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: sparse tensors are not supported on the 'neuron' device (to_sparse of a "
					   "neuron tensor). Convert on the CPU: x.cpu().to_sparse().");
	return self;
}
Tensor to_sparse_dim(const Tensor &self, int64_t) { return to_sparse_refused(self); }
Tensor to_sparse_layout(const Tensor &self, std::optional<c10::Layout>, at::OptionalIntArrayRef, std::optional<int64_t>)
{
	return to_sparse_refused(self);
}
Tensor to_sparse_dense_dim(const Tensor &self, std::optional<int64_t>) { return to_sparse_refused(self); }
Tensor to_sparse_blocked(const Tensor &self, c10::IntArrayRef, std::optional<int64_t>) { return to_sparse_refused(self); }

} // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>()); }
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_unsupported>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_unsupported>());
}

// Copies to and from the device take conjugate / negative views as they are: the
// device copy applies the bits itself (ops_core.cpp). Without these, PyTorch's
// conjugate fallback materialises the view with clone(), whose copy comes back to
// _copy_from with the view, which the fallback clones again: the recursion that
// ended torch.fft.hfft on 'neuron' with a stack overflow (issue 15).
TORCH_LIBRARY_IMPL(aten, Conjugate, m)
{
	m.impl("_copy_from", torch::CppFunction::makeFallthrough());
	m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m)
{
	m.impl("_copy_from", torch::CppFunction::makeFallthrough());
	m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_to_sparse.sparse_dim", &to_sparse_dim);
	m.impl("_to_sparse", &to_sparse_layout);
	m.impl("_to_sparse_csr", &to_sparse_dense_dim);
	m.impl("_to_sparse_csc", &to_sparse_dense_dim);
	m.impl("_to_sparse_bsr", &to_sparse_blocked);
	m.impl("_to_sparse_bsc", &to_sparse_blocked);
}

} // namespace torch_neuron
