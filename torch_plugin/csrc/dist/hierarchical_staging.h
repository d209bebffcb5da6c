// What the hierarchical backend's stages between hosts read and write (gloo, on
// host memory): host staging copies of neuron tensors, and the checks of what a
// call is given. Shared by hierarchical*.cpp.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

namespace torch_neuron::dist {

// The one neuron tensor of a call's tensor list.
inline at::Tensor one_neuron(const std::vector<at::Tensor> &tensors, const char *what)
{
	TORCH_CHECK(tensors.size() == 1, "neuron backend: ", what, " takes one tensor per rank, got ", tensors.size());
	TORCH_CHECK(tensors[0].device().is_privateuseone(), "neuron backend: ", what, " needs neuron tensors, got one on ",
		    tensors[0].device());
	return tensors[0];
}

inline void same_kind_as(const at::Tensor &a, const at::Tensor &b, const char *what)
{
	TORCH_CHECK(b.device() == a.device(), "neuron backend: ", what, ": tensors on ", a.device(), " and ", b.device());
	TORCH_CHECK(b.scalar_type() == a.scalar_type(), "neuron backend: ", what, ": dtypes ", a.scalar_type(), " and ",
		    b.scalar_type(), " differ");
}

// At the call, what the host's neurond group would refuse on the worker (where a
// refusal would break the group): the reduce ops and dtypes it reduces.
inline void check_reducible(const at::Tensor &t, const c10d::ReduceOp &op, const char *what)
{
	using R = c10d::ReduceOp;
	TORCH_CHECK(op.op_ == R::SUM || op.op_ == R::AVG || op.op_ == R::MAX || op.op_ == R::MIN || op.op_ == R::PRODUCT,
		    "neuron backend: ", what, ": reduce op ", static_cast<int>(op.op_),
		    " is not supported (SUM, AVG, MAX, MIN and PRODUCT are)");
	const auto d = t.scalar_type();
	TORCH_CHECK(d == at::kFloat || d == at::kBFloat16 || d == at::kHalf || d == at::kInt || d == at::kLong ||
			    d == at::kByte,
		    "neuron backend: ", what, ": dtype ", d,
		    " is not reduced (float32, bfloat16, float16, int32, int64, uint8 are)");
}

// A contiguous host copy to move (the copy waits for the device).
inline at::Tensor host_copy(const at::Tensor &t) { return t.to(at::kCPU).contiguous(); }

// A contiguous host copy to reduce: halves are widened to float32, which gloo
// reduces in every build and which holds them exactly.
inline at::Tensor host_copy_to_reduce(const at::Tensor &t)
{
	at::Tensor h = host_copy(t);
	if (h.scalar_type() == at::kHalf || h.scalar_type() == at::kBFloat16)
		h = h.to(at::kFloat);
	return h;
}

// t (any layout) takes h's values (h: t's numel, any dtype).
inline void copy_from_host(const at::Tensor &t, const at::Tensor &h) { t.copy_(h.to(t.scalar_type()).view(t.sizes())); }

} // namespace torch_neuron::dist
