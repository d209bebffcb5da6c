// Batch norm (training with running statistics, eval) and its backward.
#include "cmds.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

// ---- batch norm: statistics over every dim but 1 ----

Tensor chan_view(const Tensor &t, int64_t nd)
{
	std::vector<int64_t> shape(nd, 1);
	shape[1] = t.numel();
	return t.view(shape);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_f32(const Tensor &x, const std::optional<Tensor> &weight,
						  const std::optional<Tensor> &bias, const std::optional<Tensor> &rmean,
						  const std::optional<Tensor> &rvar, bool training, double momentum, double eps)
{
	const int64_t nd = x.dim();
	const bool have_running = rmean && rmean->defined() && rvar && rvar->defined();
	if (!float_dev(x) || nd < 2 || x.scalar_type() != c10::kFloat || (!training && !have_running)) {
		note_fallback("aten::native_batch_norm");
		auto r = [&](const std::optional<Tensor> &t) { return cpu_opt(t); };
		Tensor rm = have_running ? rmean->cpu() : Tensor(), rv = have_running ? rvar->cpu() : Tensor();
		auto [o, m, v] = at::native_batch_norm(x.cpu(), r(weight), r(bias), have_running ? std::optional<Tensor>(rm) : std::nullopt,
						       have_running ? std::optional<Tensor>(rv) : std::nullopt, training, momentum, eps);
		if (have_running) {
			rmean->copy_(rm);
			rvar->copy_(rv);
		}
		return {o.to(x.device()), m.to(x.device()), v.to(x.device())};
	}
	NEURON_NATIVE("native_batch_norm");
	const int64_t c = x.size(1);
	int64_t mask = 0, count = 1;
	for (int64_t i = 0; i < nd; ++i)
		if (i != 1) {
			mask |= int64_t{1} << i;
			count *= x.size(i);
		}
	const auto ks = keep_shape(x, mask);
	Tensor out = at::empty(x.sizes(), x.options());
	Tensor mean, rstd;
	if (training) {
		mean = at::empty(ks, x.options());
		reduce_cmd(NEURON_OP_MEAN, mean, x, mask);
		Tensor xc = at::empty(x.sizes(), x.options());
		binary_op(NEURON_OP_SUB, xc, x, mean);
		binary_op(NEURON_OP_MUL, out, xc, xc);
		Tensor var = at::empty(ks, x.options());
		reduce_cmd(NEURON_OP_MEAN, var, out, mask);
		rstd = at::empty(ks, x.options());
		scalar_op(NEURON_OP_ADD_SCALAR, rstd, var, eps);
		math_cmd(rstd, rstd, NEURON_UNARY_RSQRT);
		binary_op(NEURON_OP_MUL, out, xc, rstd);
		if (have_running) {
			// running = (1 - m) running + m stat (the variance unbiased)
			scalar_op(NEURON_OP_MUL_SCALAR, *rmean, *rmean, 1.0 - momentum);
			binary_op(NEURON_OP_ADD, *rmean, *rmean, mean.view({c}), momentum);
			scalar_op(NEURON_OP_MUL_SCALAR, *rvar, *rvar, 1.0 - momentum);
			binary_op(NEURON_OP_ADD, *rvar, *rvar, var.view({c}),
				  momentum * static_cast<double>(count) / static_cast<double>(std::max<int64_t>(count - 1, 1)));
		}
	} else {
		Tensor rs = at::empty({c}, x.options());
		scalar_op(NEURON_OP_ADD_SCALAR, rs, *rvar, eps);
		math_cmd(rs, rs, NEURON_UNARY_RSQRT);
		binary_op(NEURON_OP_SUB, out, x, chan_view(*rmean, nd));
		binary_op(NEURON_OP_MUL, out, out, chan_view(rs, nd));
	}
	if (weight && weight->defined())
		binary_op(NEURON_OP_MUL, out, out, chan_view(*weight, nd));
	if (bias && bias->defined())
		binary_op(NEURON_OP_ADD, out, out, chan_view(*bias, nd));
	if (!training)
		return {out, at::empty({0}, x.options()), at::empty({0}, x.options())};
	return {out, mean.view({c}), rstd.view({c})};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_f32(const Tensor &go, const Tensor &x,
							   const std::optional<Tensor> &weight,
							   const std::optional<Tensor> &rmean, const std::optional<Tensor> &rvar,
							   const std::optional<Tensor> &save_mean,
							   const std::optional<Tensor> &save_invstd, bool train, double eps,
							   std::array<bool, 3> mask3)
{
	const int64_t nd = x.dim();
	const bool ok = float_dev(go) && float_dev(x) && nd >= 2 && x.scalar_type() == c10::kFloat &&
			(train ? (save_mean && save_mean->defined() && save_invstd && save_invstd->defined())
			       : (rmean && rmean->defined() && rvar && rvar->defined()));
	if (!ok) {
		note_fallback("aten::native_batch_norm_backward");
		auto [a, b, c] = at::native_batch_norm_backward(go.cpu(), x.cpu(), cpu_opt(weight), cpu_opt(rmean), cpu_opt(rvar),
								cpu_opt(save_mean), cpu_opt(save_invstd), train, eps, mask3);
		auto mv = [&](const Tensor &t) { return t.defined() ? t.to(x.device()) : t; };
		return {mv(a), mv(b), mv(c)};
	}
	NEURON_NATIVE("native_batch_norm_backward");
	const int64_t c = x.size(1);
	int64_t mask = 0;
	for (int64_t i = 0; i < nd; ++i)
		if (i != 1)
			mask |= int64_t{1} << i;
	const auto ks = keep_shape(x, mask);
	Tensor mean, rstd;
	if (train) {
		mean = chan_view(*save_mean, nd);
		rstd = chan_view(*save_invstd, nd);
	} else {
		mean = chan_view(*rmean, nd);
		Tensor rs = at::empty({c}, x.options());
		scalar_op(NEURON_OP_ADD_SCALAR, rs, *rvar, eps);
		math_cmd(rs, rs, NEURON_UNARY_RSQRT);
		rstd = chan_view(rs, nd);
	}
	Tensor xhat = at::empty(x.sizes(), x.options());
	binary_op(NEURON_OP_SUB, xhat, x, mean);
	binary_op(NEURON_OP_MUL, xhat, xhat, rstd);
	Tensor dx, dw, db;
	if (mask3[0]) {
		Tensor g = at::empty(x.sizes(), x.options());
		if (weight && weight->defined())
			binary_op(NEURON_OP_MUL, g, go, chan_view(*weight, nd));
		else
			copy_cast_into(g, go);
		if (train) {
			Tensor m1 = at::empty(ks, x.options()), m2 = at::empty(ks, x.options()), t = at::empty(x.sizes(), x.options());
			reduce_cmd(NEURON_OP_MEAN, m1, g, mask);
			binary_op(NEURON_OP_MUL, t, g, xhat);
			reduce_cmd(NEURON_OP_MEAN, m2, t, mask);
			binary_op(NEURON_OP_MUL, t, xhat, m2);
			binary_op(NEURON_OP_SUB, g, g, m1);
			binary_op(NEURON_OP_SUB, g, g, t);
		}
		binary_op(NEURON_OP_MUL, g, g, rstd);
		dx = g;
	}
	if (mask3[1]) {
		Tensor t = at::empty(x.sizes(), x.options());
		binary_op(NEURON_OP_MUL, t, go, xhat);
		dw = at::empty(ks, x.options());
		reduce_cmd(NEURON_OP_SUM, dw, t, mask);
		dw = dw.view({c});
	}
	if (mask3[2]) {
		db = at::empty(ks, x.options());
		reduce_cmd(NEURON_OP_SUM, db, go, mask);
		db = db.view({c});
	}
	return {dx, dw, db};
}

// ---- bf16 / f16: statistics and arithmetic in f32, as PyTorch's CPU kernels ----

std::optional<Tensor> as_f32(const std::optional<Tensor> &t)
{
	if (!t || !t->defined() || t->scalar_type() == c10::kFloat)
		return t;
	return t->to(c10::kFloat);
}

bool reduced_float(const Tensor &t) { return t.scalar_type() == c10::kBFloat16 || t.scalar_type() == c10::kHalf; }

std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor &x, const std::optional<Tensor> &weight,
					      const std::optional<Tensor> &bias, const std::optional<Tensor> &rmean,
					      const std::optional<Tensor> &rvar, bool training, double momentum, double eps)
{
	if (!reduced_float(x) || !float_dev(x))
		return batch_norm_f32(x, weight, bias, rmean, rvar, training, momentum, eps);
	// Running statistics kept in a reduced type are updated through f32 copies.
	std::optional<Tensor> rm = as_f32(rmean), rv = as_f32(rvar);
	auto [out, mean, invstd] = batch_norm_f32(x.to(c10::kFloat), as_f32(weight), as_f32(bias), rm, rv, training,
						  momentum, eps);
	if (training && rm && !rm->is_same(*rmean)) {
		rmean->copy_(*rm);
		rvar->copy_(*rv);
	}
	// The saved statistics stay f32 (PyTorch's CPU kernel keeps its opmath type
	// there when the parameters are f32; the backward reads them as such).
	const c10::ScalarType stat = weight && weight->defined() ? weight->scalar_type() : c10::kFloat;
	auto stat_t = [&](const Tensor &t) { return t.numel() && stat != c10::kFloat ? t.to(stat) : t; };
	return {out.to(x.scalar_type()), stat_t(mean), stat_t(invstd)};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor &go, const Tensor &x, const std::optional<Tensor> &weight,
						       const std::optional<Tensor> &rmean, const std::optional<Tensor> &rvar,
						       const std::optional<Tensor> &save_mean,
						       const std::optional<Tensor> &save_invstd, bool train, double eps,
						       std::array<bool, 3> mask3)
{
	if (!reduced_float(x) || !float_dev(x))
		return batch_norm_backward_f32(go, x, weight, rmean, rvar, save_mean, save_invstd, train, eps, mask3);
	auto [dx, dw, db] = batch_norm_backward_f32(go.to(c10::kFloat), x.to(c10::kFloat), as_f32(weight), as_f32(rmean),
						    as_f32(rvar), as_f32(save_mean), as_f32(save_invstd), train, eps, mask3);
	const c10::ScalarType pdt = weight && weight->defined() ? weight->scalar_type() : x.scalar_type();
	auto cast = [](const Tensor &t, c10::ScalarType dt) { return t.defined() ? t.to(dt) : t; };
	return {cast(dx, x.scalar_type()), cast(dw, pdt), cast(db, pdt)};
}

// ---- the functional entry points (torch.export / OpInfo reach these) ----

std::tuple<Tensor, Tensor, Tensor> bn_legit(const Tensor &x, const std::optional<Tensor> &w, const std::optional<Tensor> &b,
					    Tensor &rmean, Tensor &rvar, bool training, double momentum, double eps)
{
	NEURON_NATIVE("_native_batch_norm_legit");
	return batch_norm(x, w, b, rmean, rvar, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> bn_legit_no_stats(const Tensor &x, const std::optional<Tensor> &w,
						     const std::optional<Tensor> &b, bool training, double momentum, double eps)
{
	NEURON_NATIVE("_native_batch_norm_legit");
	return batch_norm(x, w, b, std::nullopt, std::nullopt, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor, Tensor> bn_with_update(const Tensor &x, const std::optional<Tensor> &w,
							  const std::optional<Tensor> &b, Tensor &rmean, Tensor &rvar,
							  double momentum, double eps)
{
	NEURON_NATIVE("_batch_norm_with_update");
	auto [out, mean, invstd] = batch_norm(x, w, b, rmean, rvar, true, momentum, eps);
	return {out, mean, invstd, at::empty({0}, x.options().dtype(c10::kByte))};
}
std::tuple<Tensor, Tensor, Tensor> bn_backward_new(const Tensor &go, const Tensor &x, const Tensor &w,
						   const std::optional<Tensor> &rmean, const std::optional<Tensor> &rvar,
						   const std::optional<Tensor> &save_mean, const std::optional<Tensor> &save_var,
						   bool update, double eps, std::array<bool, 3> mask, const Tensor &)
{
	NEURON_NATIVE("batch_norm_backward");
	return batch_norm_backward(go, x, w, rmean, rvar, save_mean, save_var, update, eps, mask);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("native_batch_norm", &batch_norm);
	m.impl("native_batch_norm_backward", &batch_norm_backward);
	m.impl("_native_batch_norm_legit", &bn_legit);
	m.impl("_native_batch_norm_legit.no_stats", &bn_legit_no_stats);
	m.impl("_batch_norm_with_update", &bn_with_update);
	m.impl("batch_norm_backward", &bn_backward_new);
}

} // namespace torch_neuron
