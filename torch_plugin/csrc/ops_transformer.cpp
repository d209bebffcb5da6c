// The eval-mode fast path of nn.TransformerEncoderLayer (taken for this device under
// torch.no_grad()): PyTorch's own implementations of _transformer_encoder_layer_fwd
// and _native_multi_head_attention are compositions of dispatched ops (linear,
// layer_norm, bmm, softmax, ...), so they are registered for this device as they
// are, and run on the native kernels of those ops; the one CPU-only piece they call,
// _transform_bias_rescale_qkv, is composed here (with _addmm_activation, the fused
// linear + relu/gelu its feed-forward block calls, and _masked_softmax, which the
// attention calls when there is a mask: a causal or a key padding one).
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

#include <cmath>

namespace torch_neuron {

namespace {

// qkv [B, T, 3 * D] (+ bias [3 * D]) -> q, k, v as [B, heads, T, D / heads] each, q
// scaled by 1 / sqrt(D / heads), as the CPU and CUDA kernels return them.
std::tuple<Tensor, Tensor, Tensor> transform_bias_rescale_qkv(const Tensor &qkv, const Tensor &bias, int64_t heads)
{
	NEURON_NATIVE("_transform_bias_rescale_qkv");
	TORCH_CHECK(!qkv.is_nested(), "neuron: _transform_bias_rescale_qkv: nested tensors are not supported");
	TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0, "_transform_bias_rescale_qkv: expected qkv of shape [B, T, 3 * D], got ",
		    qkv.sizes());
	const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3;
	TORCH_CHECK(heads > 0 && d % heads == 0, "_transform_bias_rescale_qkv: embed dim ", d,
		    " is not divisible by the number of heads ", heads);
	const int64_t dh = d / heads;
	Tensor x = at::add(qkv, bias).view({b, t, 3, heads, dh}).permute({2, 0, 3, 1, 4});
	Tensor q = at::mul(x.select(0, 0), 1.0 / std::sqrt(static_cast<double>(dh)));
	return {q, x.select(0, 1).contiguous(), x.select(0, 2).contiguous()};
}

// linear + activation, as the fast path's feed-forward block calls it.
Tensor &addmm_activation_o(const Tensor &self, const Tensor &m1, const Tensor &m2, const Scalar &beta, const Scalar &alpha,
			   bool use_gelu, Tensor &out)
{
	NEURON_NATIVE("_addmm_activation");
	at::addmm_out(out, self, m1, m2, beta, alpha);
	return use_gelu ? at::gelu_(out) : at::relu_(out);
}
Tensor addmm_activation(const Tensor &self, const Tensor &m1, const Tensor &m2, const Scalar &beta, const Scalar &alpha,
			bool use_gelu)
{
	Tensor out = at::empty({m1.size(0), m2.size(1)}, m1.options());
	return addmm_activation_o(self, m1, m2, beta, alpha, use_gelu, out);
}

// softmax over dim with the elements where mask is true left out; a row left out
// entirely gives NaN, as PyTorch 2.13's CPU kernel does. mask_type 0: a
// [L, L] attention mask, 1: a [B, L] key padding mask for scores [B, heads, L, L],
// 2 or none: broadcastable to the scores.
Tensor masked_softmax(const Tensor &x, const Tensor &mask, std::optional<int64_t> dim, std::optional<int64_t> mask_type)
{
	NEURON_NATIVE("_masked_softmax");
	TORCH_CHECK(mask.scalar_type() == at::kBool, "_masked_softmax: mask must be bool, got ", mask.scalar_type());
	TORCH_CHECK(x.is_floating_point(), "_masked_softmax: expected a floating input, got ", x.scalar_type());
	const int64_t d = at::maybe_wrap_dim(dim.value_or(x.dim() - 1), x.dim());
	Tensor m = mask;
	if (mask_type && *mask_type == 1) {
		TORCH_CHECK(x.dim() == 4 && mask.dim() == 2 && mask.size(0) == x.size(0) && mask.size(1) == x.size(3),
			    "_masked_softmax: a key padding mask (mask_type 1) must be [B, L] for scores [B, heads, L, L], got ",
			    mask.sizes(), " for ", x.sizes());
		m = mask.view({mask.size(0), 1, 1, mask.size(1)});
	}
	TORCH_CHECK(at::is_expandable_to(m.sizes(), x.sizes()),
		    "_masked_softmax: mask of shape ", mask.sizes(), " does not broadcast to the input's ", x.sizes());
	return at::_softmax(at::masked_fill(x, m.expand(x.sizes()), -INFINITY), d, false);
}

std::tuple<Tensor, Tensor> native_mha(const Tensor &q, const Tensor &k, const Tensor &v, int64_t embed_dim, int64_t heads,
				      const Tensor &qkv_w, const Tensor &qkv_b, const Tensor &proj_w, const Tensor &proj_b,
				      const std::optional<Tensor> &mask, bool need_weights, bool average_weights,
				      std::optional<int64_t> mask_type)
{
	NEURON_NATIVE("_native_multi_head_attention");
	return at::native::native_multi_head_attention_cpu(q, k, v, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, mask,
							   need_weights, average_weights, mask_type);
}

Tensor encoder_layer_fwd(const Tensor &src, int64_t embed_dim, int64_t heads, const Tensor &qkv_w, const Tensor &qkv_b,
			 const Tensor &proj_w, const Tensor &proj_b, bool use_gelu, bool norm_first, double eps,
			 const Tensor &n1_w, const Tensor &n1_b, const Tensor &n2_w, const Tensor &n2_b, const Tensor &f1_w,
			 const Tensor &f1_b, const Tensor &f2_w, const Tensor &f2_b, const std::optional<Tensor> &mask,
			 std::optional<int64_t> mask_type)
{
	NEURON_NATIVE("_transformer_encoder_layer_fwd");
	return at::native::transformer_encoder_layer_forward(src, embed_dim, heads, qkv_w, qkv_b, proj_w, proj_b, use_gelu,
							     norm_first, eps, n1_w, n1_b, n2_w, n2_b, f1_w, f1_b, f2_w, f2_b,
							     mask, mask_type);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_transform_bias_rescale_qkv", &transform_bias_rescale_qkv);
	m.impl("_native_multi_head_attention", &native_mha);
	m.impl("_transformer_encoder_layer_fwd", &encoder_layer_fwd);
	m.impl("_addmm_activation", &addmm_activation);
	m.impl("_addmm_activation.out", &addmm_activation_o);
	m.impl("_masked_softmax", &masked_softmax);
}

} // namespace torch_neuron
