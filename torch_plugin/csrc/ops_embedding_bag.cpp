// embedding_bag on the device (modes sum, mean, max; per-sample weights,
// padding_idx, include_last_offset) and its dense backward, as gathers and
// INDEX_ADDs: the rows of the bag's indices are gathered once, and each row is
// combined into its bag (offset2bag, made on the device from the offsets).
// Outputs as PyTorch's _embedding_bag: (output [B, D], offset2bag [N],
// bag_size [B], max_indices [B, D] for max, else [B]).
#include "cmds.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

// bag of each index: number of offsets <= its position, minus one.
Tensor offset_to_bag(const Tensor &offsets, int64_t n, int64_t bags)
{
	Tensor ob = at::zeros({n + 1}, offsets.options().dtype(c10::kLong));
	Tensor starts = offsets.narrow(0, 0, bags).to(c10::kLong);
	ob.index_add_(0, starts, at::ones({bags}, ob.options()));
	ob = at::cumsum(ob, 0) - 1;
	return ob.narrow(0, 0, n).contiguous();
}

// Indices that count (not padding_idx), as 0/1 in dtype dt.
Tensor kept(const Tensor &indices, int64_t padding_idx, c10::ScalarType dt)
{
	return at::ne(indices, padding_idx).to(dt);
}

using BagOut = std::tuple<Tensor, Tensor, Tensor, Tensor>;

BagOut embedding_bag(const Tensor &weight, const Tensor &indices_in, const Tensor &offsets_in, bool scale_grad_by_freq,
		     int64_t mode, bool sparse, const std::optional<Tensor> &psw, bool include_last_offset,
		     int64_t padding_idx)
{
	NEURON_NATIVE("_embedding_bag");
	const bool have_psw = psw && psw->defined();
	if (!float_dev(weight) || indices_in.dim() != 1 || offsets_in.dim() != 1 || !index_ok(indices_in) ||
	    !index_ok(offsets_in) || (have_psw && !float_dev(*psw))) {
		note_fallback("_embedding_bag");
		auto [a, b, c, d] = at::_embedding_bag(weight.cpu(), indices_in.cpu(), offsets_in.cpu(), scale_grad_by_freq,
						       mode, sparse, cpu_opt(psw), include_last_offset, padding_idx);
		return {a.to(weight.device()), b.to(weight.device()), c.to(weight.device()), d.to(weight.device())};
	}
	TORCH_CHECK(mode == kSum || !have_psw, "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
					       "supported for mode='sum' (got mode='", mode == kMean ? "mean" : "max", "')");
	const Tensor indices = indices_in.to(c10::kLong), offsets = offsets_in.to(c10::kLong);
	const int64_t n = indices.numel(), dim = weight.size(1);
	const int64_t bags = include_last_offset ? std::max<int64_t>(offsets.numel() - 1, 0) : offsets.numel();
	const Tensor ob = offset_to_bag(offsets, n, bags);
	const Tensor keep = kept(indices, padding_idx, weight.scalar_type());
	Tensor rows = at::index_select(weight, 0, indices) * keep.unsqueeze(1);
	if (have_psw)
		rows = rows * psw->unsqueeze(1);
	Tensor bag_size = at::zeros({bags}, indices.options()).index_add_(0, ob, keep.to(c10::kLong));
	if (mode != kMax) {
		Tensor out = at::zeros({bags, dim}, weight.options()).index_add_(0, ob, rows);
		if (mode == kMean)
			out = out / at::clamp_min(bag_size, 1).unsqueeze(1).to(weight.scalar_type());
		return {out, ob, bag_size, bag_size.clone()};
	}
	// max: padding rows never win (-inf); empty bags give 0 and index -1.
	const Tensor cand = at::where(keep.unsqueeze(1) != 0, rows, -INFINITY);
	Tensor out = at::full({bags, dim}, -INFINITY, weight.options()).index_reduce_(0, ob, cand, "amax");
	// The winner of a bag is its first row holding the max (PyTorch's strict >).
	const Tensor hit = at::eq(cand, at::index_select(out, 0, ob)).logical_and_(keep.unsqueeze(1) != 0);
	const Tensor pos = at::arange(n, indices.options()).unsqueeze(1).expand({n, dim});
	const Tensor first = at::full({bags, dim}, n, indices.options())
				     .index_reduce_(0, ob, at::where(hit, pos, n), "amin");
	const Tensor empty = at::eq(bag_size, 0).unsqueeze(1);
	Tensor max_idx = at::where(at::eq(first, n), -1, at::index_select(indices, 0, at::clamp_max(first, n - 1).reshape({-1}))
								.view({bags, dim}));
	out = at::where(empty, 0.0, out);
	return {out, ob, bag_size, max_idx};
}

Tensor embedding_bag_dense_backward(const Tensor &grad, const Tensor &indices_in, const Tensor &ob, const Tensor &bag_size,
				    const Tensor &max_indices, int64_t num_weights, bool scale_grad_by_freq, int64_t mode,
				    const std::optional<Tensor> &psw, int64_t padding_idx)
{
	NEURON_NATIVE("_embedding_bag_dense_backward");
	const bool have_psw = psw && psw->defined();
	if (!float_dev(grad) || !index_ok(indices_in) || !index_ok(ob) || (have_psw && !float_dev(*psw))) {
		note_fallback("_embedding_bag_dense_backward");
		return at::_embedding_bag_dense_backward(grad.cpu(), indices_in.cpu(), ob.cpu(), bag_size.cpu(),
							 max_indices.cpu(), num_weights, scale_grad_by_freq, mode,
							 cpu_opt(psw), padding_idx)
			.to(grad.device());
	}
	const Tensor indices = indices_in.to(c10::kLong);
	const int64_t dim = grad.size(1);
	Tensor gw = at::zeros({num_weights + 1, dim}, grad.options()); // the last row takes what is dropped
	if (mode == kMax) {
		const Tensor target = at::where(at::lt(max_indices, 0), num_weights, max_indices);
		gw.scatter_add_(0, target, grad);
	} else {
		Tensor g = at::index_select(grad, 0, ob);
		if (mode == kMean)
			g = g / at::clamp_min(at::index_select(bag_size, 0, ob), 1).unsqueeze(1).to(grad.scalar_type());
		if (have_psw)
			g = g * psw->unsqueeze(1);
		if (scale_grad_by_freq) {
			const Tensor freq = at::zeros({num_weights}, indices.options()).index_add_(0, indices, at::ones_like(indices));
			g = g / at::index_select(freq, 0, indices).unsqueeze(1).to(grad.scalar_type());
		}
		const Tensor target = padding_idx >= 0 ? at::where(at::eq(indices, padding_idx), num_weights, indices) : indices;
		gw.index_add_(0, target, g);
	}
	return gw.narrow(0, 0, num_weights).contiguous();
}

Tensor embedding_bag_psw_backward(const Tensor &grad, const Tensor &weight, const Tensor &indices, const Tensor &offsets,
				  const Tensor &ob, int64_t mode, int64_t padding_idx)
{
	NEURON_NATIVE("_embedding_bag_per_sample_weights_backward");
	TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
	if (!float_dev(grad) || !float_dev(weight) || !index_ok(indices)) {
		note_fallback("_embedding_bag_per_sample_weights_backward");
		return at::_embedding_bag_per_sample_weights_backward(grad.cpu(), weight.cpu(), indices.cpu(), offsets.cpu(),
								      ob.cpu(), mode, padding_idx)
			.to(grad.device());
	}
	const Tensor ix = indices.to(c10::kLong);
	const Tensor g = (at::index_select(grad, 0, ob) * at::index_select(weight, 0, ix)).sum(1);
	return g * kept(ix, padding_idx, g.scalar_type());
}

// The backward autograd calls: the dense form (a sparse gradient is refused, as
// sparse tensors are on this device).
Tensor embedding_bag_backward(const Tensor &grad, const Tensor &indices, const Tensor &offsets, const Tensor &ob,
			      const Tensor &bag_size, const Tensor &max_indices, int64_t num_weights,
			      bool scale_grad_by_freq, int64_t mode, bool sparse, const std::optional<Tensor> &psw,
			      int64_t padding_idx)
{
	NEURON_NATIVE("_embedding_bag_backward");
	TORCH_CHECK_NOT_IMPLEMENTED(!sparse, "neuron: sparse gradients (embedding_bag(sparse=True)) are not supported on the "
					    "'neuron' device; use sparse=False");
	(void)offsets;
	return embedding_bag_dense_backward(grad, indices, ob, bag_size, max_indices, num_weights, scale_grad_by_freq, mode,
					    psw, padding_idx);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("_embedding_bag_backward", &embedding_bag_backward);
	m.impl("_embedding_bag", &embedding_bag);
	m.impl("_embedding_bag_forward_only", &embedding_bag);
	m.impl("_embedding_bag_dense_backward", &embedding_bag_dense_backward);
	m.impl("_embedding_bag_per_sample_weights_backward", &embedding_bag_psw_backward);
}

} // namespace torch_neuron
