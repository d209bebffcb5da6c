// torch.nn.functional.scaled_dot_product_attention as one fused chip command
// (ATTENTION, ISA 1.4) through PyTorch's "overrideable" SDPA backend:
// _fused_sdp_choice picks it for every call the chip can take (no dropout,
// f32/bf16/f16, at most 8 dims), the forward is one ATTENTION command that also
// returns each row's log-sum-exp, and the backward recomputes the probabilities
// from it (as flash attention's backward does) with native matmuls.
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// at::sdp::SDPBackend (ATen/native/transformers/sdp_utils_cpp.h).
constexpr int64_t kSdpMath = 0, kSdpOverrideable = 4;

double sdpa_scale(const Tensor &q, std::optional<double> scale)
{
	return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

bool fused_ok(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &mask, double dropout_p)
{
	const auto floating = [&](const Tensor &t) { return float_dev(t) && t.scalar_type() == q.scalar_type(); };
	if (dropout_p != 0.0 || !floating(q) || !floating(k) || !floating(v) || q.dim() < 2 || q.dim() > 7 ||
	    k.dim() != q.dim() || v.dim() != q.dim())
		return false;
	if (mask && mask->defined())
		return chip_ok(*mask) && (mask->scalar_type() == c10::kBool || at::isFloatingType(mask->scalar_type())) &&
		       mask->dim() <= q.dim();
	return true;
}

} // namespace

int64_t fused_sdp_choice(const Tensor &q, const Tensor &k, const Tensor &v, const std::optional<Tensor> &mask,
			 double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa)
{
	if (!fused_ok(q, k, v, mask, dropout_p))
		return kSdpMath;
	// Grouped-query attention: whole groups of query heads per key head.
	if (q.dim() >= 3 && q.size(-3) != k.size(-3))
		return enable_gqa && k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0 && k.size(-3) == v.size(-3) ? kSdpOverrideable
														   : kSdpMath;
	return kSdpOverrideable;
}

namespace {

// k / v with their heads repeated for the groups of query heads, as stride-0
// views (no copy): [.., Hkv, S, E] -> [.., Hq, S, E].
Tensor group_heads(const Tensor &kv, int64_t hq)
{
	const int64_t hk = kv.size(-3);
	if (hk == hq)
		return kv;
	std::vector<int64_t> shape(kv.sizes().begin(), kv.sizes().end());
	shape.insert(shape.end() - 2, hq / hk); // [.., Hkv, g, S, E]
	return kv.unsqueeze(-3).expand(shape).flatten(-4, -3);
}

// The additive mask the chip reads: the user's mask (bool or float, cast to q's
// dtype) broadcast to [.., L, S], or one zero broadcast everywhere.
Tensor chip_mask(const std::optional<Tensor> &mask, const Tensor &q, int64_t S)
{
	std::vector<int64_t> shape(q.sizes().begin(), q.sizes().end());
	shape.back() = S;
	if (mask && mask->defined()) {
		const Tensor m = mask->scalar_type() == c10::kBool || mask->scalar_type() == q.scalar_type()
					 ? *mask
					 : mask->to(q.scalar_type());
		return m.expand(shape);
	}
	Tensor zero = at::empty({}, q.options());
	fill_cmd(zero, 0);
	return zero.expand(shape);
}

void attention_cmd(const Tensor &out, const Tensor &lse, const Tensor &q, const Tensor &k, const Tensor &v,
		   const Tensor &mask, double scale, bool causal)
{
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_ATTENTION, 6);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(lse);
	cmd.operands[2] = desc(q);
	cmd.operands[3] = desc(k);
	cmd.operands[4] = desc(v);
	cmd.operands[5] = desc(mask);
	cmd.fscalars.f[0] = scale;
	cmd.iscalars[0] = causal ? NEURON_ATTENTION_CAUSAL : 0;
	submit(out, cmd);
}

using FusedOut = std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>;

FusedOut fused_forward(const Tensor &q, const Tensor &k_in, const Tensor &v_in, const std::optional<Tensor> &bias,
		       double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale)
{
	NEURON_NATIVE("_scaled_dot_product_fused_attention_overrideable");
	TORCH_CHECK(fused_ok(q, k_in, v_in, bias, dropout_p),
		    "neuron: the fused attention takes f32/bf16/f16 q, k, v of one dtype and rank 2-7 and no dropout");
	const Tensor k = group_heads(k_in, q.dim() >= 3 ? q.size(-3) : 1), v = group_heads(v_in, q.dim() >= 3 ? q.size(-3) : 1);
	const int64_t L = q.size(-2), S = k.size(-2);
	std::vector<int64_t> oshape(q.sizes().begin(), q.sizes().end());
	oshape.back() = v.size(-1);
	Tensor out = at::empty(oshape, q.options());
	Tensor lse = at::empty(q.sizes().slice(0, q.dim() - 1), q.options().dtype(c10::kFloat));
	if (out.numel() > 0)
		attention_cmd(out, lse, q, k, v, chip_mask(bias, q, S), sdpa_scale(q, scale), is_causal);
	else if (lse.numel() > 0)
		fill_cmd(lse, -INFINITY);
	const Tensor none = at::empty({0}, q.options());
	return {out, lse, none, none, c10::SymInt(L), c10::SymInt(S), none, none, none};
}

std::tuple<Tensor, Tensor, Tensor, Tensor>
fused_backward(const Tensor &grad_out, const Tensor &q, const Tensor &k_in, const Tensor &v_in, const Tensor &bias,
	       std::array<bool, 4> mask, const Tensor &out, const Tensor &lse, const Tensor &, const Tensor &,
	       c10::SymInt, c10::SymInt, double, bool is_causal, const Tensor &, const Tensor &, std::optional<double> scale)
{
	NEURON_NATIVE("_scaled_dot_product_fused_attention_overrideable_backward");
	const int64_t hq = q.dim() >= 3 ? q.size(-3) : 1;
	const Tensor k = group_heads(k_in, hq), v = group_heads(v_in, hq);
	const double sc = sdpa_scale(q, scale);
	const int64_t L = q.size(-2), S = k.size(-2);
	// P = exp(scale q k^T + bias - lse), keys past the causal diagonal at -inf: one
	// POINTWISE after the product, the chain of elementwise commands it replaces
	// (the same bits in f32). A row that saw no key has lse = -inf and
	// probabilities 0. The infinity is a device scalar: a host scalar would be one
	// more host copy (and keep torch.compile's backward graph from being one program).
	const Tensor qk = at::matmul(q, k.transpose(-2, -1));
	const Tensor lse_safe = at::where(at::isinf(lse), at::full({}, INFINITY, lse.options()), lse).unsqueeze(-1);
	PwChain chain(qk);
	chain.then_const(NEURON_PW_MUL, 0);
	if (bias.defined() && bias.numel() > 0)
		chain.then(NEURON_PW_ADD, bias.scalar_type() == c10::kBool ? at::where(bias, at::zeros({}, q.options()),
											  at::full({}, -INFINITY, q.options()))
									     : bias);
	if (is_causal)
		chain.then(NEURON_PW_ADD, at::full({L, S}, -INFINITY, q.options()).triu(1));
	const Tensor p = at::empty(qk.sizes(), qk.options());
	chain.then(NEURON_PW_SUB, lse_safe).apply(NEURON_PW_EXP).run(p, {sc});
	const Tensor go = grad_out.to(q.scalar_type());
	Tensor dv = at::matmul(p.transpose(-2, -1), go);
	const Tensor dp = at::matmul(go, v.transpose(-2, -1));
	const Tensor rowdot = (go * out).sum(-1, true);
	const Tensor ds = at::empty(p.sizes(), p.options()); // p * (dp - rowdot)
	PwChain(dp).then(NEURON_PW_SUB, rowdot).then(NEURON_PW_MUL, p).run(ds);
	Tensor dq = mask[0] ? at::matmul(ds, k) * sc : Tensor();
	Tensor dk = mask[1] ? at::matmul(ds.transpose(-2, -1), q) * sc : Tensor();
	// Grouped heads: each key head's gradient sums over its group.
	auto ungroup = [&](const Tensor &g, const Tensor &like) {
		if (!g.defined() || like.size(-3) == hq)
			return g;
		std::vector<int64_t> shape(like.sizes().begin(), like.sizes().end());
		shape.insert(shape.end() - 2, hq / like.size(-3));
		return g.view(shape).sum(-3);
	};
	Tensor db = mask[3] && bias.defined() && bias.scalar_type() != c10::kBool ? at::sum_to(ds, bias.sizes()) : Tensor();
	return {dq, ungroup(dk, k_in), mask[2] ? ungroup(dv, v_in) : Tensor(), db};
}

} // namespace

} // namespace torch_neuron

// scaled_dot_product_attention asks this stub (not the _fused_sdp_choice op) which
// backend a PrivateUse1 device takes.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuron::fused_sdp_choice);
} // namespace at::native

namespace torch_neuron {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_fused_sdp_choice", &fused_sdp_choice);
	m.impl("_scaled_dot_product_fused_attention_overrideable", &fused_forward);
	m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &fused_backward);
}

} // namespace torch_neuron
