// torch.autocast("neuron", dtype=torch.bfloat16 or torch.float16): the
// AutocastPrivateUse1 registrations. PyTorch has no default lists for a
// PrivateUse1 device (pt#128598); these are CUDA's, through the op-list macros
// of ATen/autocast_mode.h (the lists CUDA registers itself from): matmuls and
// convolutions run in the lower precision, the ops that lose too much there
// (exp, log, pow, softmax's dtype, norms, losses) in float32, and ops with
// several floating inputs (addcmul, index_put, ...) in the widest input dtype.
// Every other op falls through to the device kernel as called.
#include <ATen/Operators.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;

// PyTorch's own ban (autocast_mode.cpp) is not exported: the same message.
Tensor binary_cross_entropy_banned(const Tensor &, const Tensor &, const std::optional<Tensor> &, int64_t)
{
	TORCH_CHECK(false, "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
			   "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
			   "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
			   "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
			   "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m)
{
#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
	AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP)
	AT_FORALL_FP32(NEURON_FP32)
	AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
	AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
	AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_LOWER_PRECISION_FP
#undef NEURON_FP32
#undef NEURON_FP32_SET_OPT_DTYPE
#undef NEURON_PROMOTE
	// As on CUDA: binary_cross_entropy is unsafe in half precision; autocast
	// raises and points at binary_cross_entropy_with_logits.
	m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
}

} // namespace

} // namespace torch_neuron
