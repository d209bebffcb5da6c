// Native kernels on the ISA 1.1 chip ops (math, comparisons, where, log-softmax,
// indexing) and the composites built on them: losses, layer norm, embedding,
// dropout, optimizer arithmetic, norms and variance, random number generation.
#include "cmds.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- unary math ----


template <class CpuFn>
Tensor &unary_math_into(const char *name, int fn, Tensor &out, const Tensor &self, CpuFn cpu, double p0 = 0,
			double p1 = 0, int64_t flags = 0)
{
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !float_dev(out)) {
		note_fallback(name);
		out.copy_(cpu(self.cpu()));
		return out;
	}
	math_cmd(out, self, fn, p0, p1, flags);
	return out;
}

#define MATH_FAMILY(name, FN, cpuexpr)                                                                              \
	Tensor name##_f(const Tensor &self)                                                                         \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		Tensor out = float_out_like(self);                                                                  \
		return unary_math_into(#name, FN, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}                                                                                                           \
	Tensor &name##_i(Tensor &self)                                                                              \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_math_into(#name, FN, self, self, [](const Tensor &x) { return cpuexpr; });            \
	}                                                                                                           \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                          \
	{                                                                                                           \
		NEURON_NATIVE(#name);                                                                               \
		return unary_math_into(#name, FN, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}

MATH_FAMILY(log, NEURON_UNARY_LOG, at::log(x))
MATH_FAMILY(sqrt, NEURON_UNARY_SQRT, at::sqrt(x))
MATH_FAMILY(rsqrt, NEURON_UNARY_RSQRT, at::rsqrt(x))
MATH_FAMILY(erf, NEURON_UNARY_ERF, at::erf(x))
MATH_FAMILY(reciprocal, NEURON_UNARY_RECIPROCAL, at::reciprocal(x))
MATH_FAMILY(sigmoid, NEURON_UNARY_SIGMOID, at::sigmoid(x))

// abs keeps integer dtypes: those go to the CPU.
Tensor &abs_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("abs");
	return unary_math_into("abs", NEURON_UNARY_ABS, out, self, [](const Tensor &x) { return at::abs(x); });
}
Tensor abs_f(const Tensor &self)
{
	Tensor out = at::empty_like(self);
	return abs_o(self, out);
}
Tensor &abs_i(Tensor &self) { return abs_o(self, self); }

Tensor &pow_ts_o(const Tensor &self, const Scalar &e, Tensor &out)
{
	NEURON_NATIVE("pow");
	const double ex = e.toDouble();
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (float_dev(self) && float_dev(out) && ex == 1.0) {
		out.copy_(self);
		return out;
	}
	return unary_math_into("pow", NEURON_UNARY_POW, out, self, [&](const Tensor &x) { return at::pow(x, e); }, ex);
}
Tensor pow_ts(const Tensor &self, const Scalar &e)
{
	Tensor out = at::isFloatingType(self.scalar_type()) ? at::empty_like(self)
							     : at::empty(self.sizes(), self.options().dtype(at::result_type(self, e)));
	return pow_ts_o(self, e, out);
}
Tensor &pow_ts_i(Tensor &self, const Scalar &e) { return pow_ts_o(self, e, self); }

Tensor &clamp_o(const Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi, Tensor &out)
{
	NEURON_NATIVE("clamp");
	const int64_t flags = (lo ? 1 : 0) | (hi ? 2 : 0);
	return unary_math_into("clamp", NEURON_UNARY_CLAMP, out, self,
			       [&](const Tensor &x) { return at::clamp(x, lo, hi); }, lo ? lo->toDouble() : 0,
			       hi ? hi->toDouble() : 0, flags);
}
Tensor clamp_f(const Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi)
{
	Tensor out = at::empty_like(self);
	return clamp_o(self, lo, hi, out);
}
Tensor &clamp_i(Tensor &self, const std::optional<Scalar> &lo, const std::optional<Scalar> &hi)
{
	return clamp_o(self, lo, hi, self);
}
Tensor clamp_min_f(const Tensor &self, const Scalar &lo) { return clamp_f(self, lo, std::nullopt); }
Tensor &clamp_min_i(Tensor &self, const Scalar &lo) { return clamp_i(self, lo, std::nullopt); }
Tensor clamp_max_f(const Tensor &self, const Scalar &hi) { return clamp_f(self, std::nullopt, hi); }
Tensor &clamp_max_i(Tensor &self, const Scalar &hi) { return clamp_i(self, std::nullopt, hi); }

// ---- binary math ----

void bmath_cmd(const Tensor &out, const Tensor &a, const Tensor &b, int fn, int64_t i1 = 0, double f0 = 0)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_BINARY_MATH, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
	cmd.operands[2] = desc(safe_input(b, out).expand(out.sizes()));
	cmd.iscalars[0] = fn;
	cmd.iscalars[1] = i1;
	cmd.fscalars.f[0] = f0;
	submit(out, cmd);
}

Tensor on_device(const Tensor &t, const Tensor &like)
{
	return t.device().is_privateuseone() ? t : t.to(like.device());
}

Tensor maxmin(const char *name, int fn, const Tensor &a, const Tensor &b)
{
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), dev_opts(dev, dt));
	if (!chip_ok(out) || dt == c10::kBool || (a.device().is_privateuseone() && !chip_ok(a)) ||
	    (b.device().is_privateuseone() && !chip_ok(b))) {
		note_fallback(name);
		out.copy_(fn == NEURON_BINARY_MAXIMUM ? at::maximum(a.cpu(), b.cpu()) : at::minimum(a.cpu(), b.cpu()));
		return out;
	}
	bmath_cmd(out, on_device(a, out), on_device(b, out), fn);
	return out;
}
Tensor maximum(const Tensor &a, const Tensor &b) { NEURON_NATIVE("maximum"); return maxmin("maximum", NEURON_BINARY_MAXIMUM, a, b); }
Tensor minimum(const Tensor &a, const Tensor &b) { NEURON_NATIVE("minimum"); return maxmin("minimum", NEURON_BINARY_MINIMUM, a, b); }

Tensor pow_tt(const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("pow");
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), dev_opts(dev, dt));
	if (!float_dev(out)) {
		note_fallback("pow");
		out.copy_(at::pow(a.cpu(), b.cpu()));
		return out;
	}
	bmath_cmd(out, on_device(a, out), on_device(b, out), NEURON_BINARY_POW);
	return out;
}

Tensor gelu_backward(const Tensor &g, const Tensor &x, c10::string_view approx)
{
	NEURON_NATIVE("gelu_backward");
	Tensor out = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	if (!float_dev(g) || !float_dev(x)) {
		note_fallback("gelu_backward");
		return at::gelu_backward(g.cpu(), x.cpu(), std::string(approx)).to(g.device());
	}
	bmath_cmd(out, g, x, NEURON_BINARY_GELU_BACKWARD, approx == "tanh" ? 1 : 0);
	return out;
}

Tensor threshold_backward(const Tensor &g, const Tensor &x, const Scalar &thr)
{
	NEURON_NATIVE("threshold_backward");
	Tensor out = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	if (!float_dev(g) || !chip_ok(x)) {
		note_fallback("threshold_backward");
		return at::threshold_backward(g.cpu(), x.cpu(), thr).to(g.device());
	}
	bmath_cmd(out, g, x, NEURON_BINARY_THRESHOLD_BACKWARD, 0, thr.toDouble());
	return out;
}

// ---- comparisons ----

Tensor &compare_into(const char *name, int fn, const Tensor &a, const Tensor &b, Tensor &out)
{
	const auto shape = at::infer_size(a.sizes(), b.sizes());
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	const bool ok = out.scalar_type() == c10::kBool && chip_ok(out) && chip_ok(a) &&
			(is_host_scalar(b) || chip_ok(b));
	if (!ok) {
		note_fallback(name);
		Tensor r;
		Tensor ac = a.cpu(), bc = b.cpu();
		switch (fn) {
		case NEURON_CMP_EQ: r = at::eq(ac, bc); break;
		case NEURON_CMP_NE: r = at::ne(ac, bc); break;
		case NEURON_CMP_LT: r = at::lt(ac, bc); break;
		case NEURON_CMP_LE: r = at::le(ac, bc); break;
		case NEURON_CMP_GT: r = at::gt(ac, bc); break;
		default: r = at::ge(ac, bc); break;
		}
		out.copy_(r);
		return out;
	}
	if (out.numel() == 0)
		return out;
	neuron_cmd cmd;
	if (is_host_scalar(b)) {
		cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
		cmd.operands[0] = desc(out);
		cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
		cmd.fscalars.f[0] = b.item().toDouble();
	} else {
		cmd_init(cmd, NEURON_OP_COMPARE, 3);
		cmd.operands[0] = desc(out);
		cmd.operands[1] = desc(safe_input(a, out).expand(out.sizes()));
		cmd.operands[2] = desc(safe_input(b, out).expand(out.sizes()));
	}
	cmd.iscalars[0] = fn;
	submit(out, cmd);
	return out;
}

Tensor compare(const char *name, int fn, const Tensor &a, const Tensor &b)
{
	// a host scalar on the left: swap and mirror the comparison.
	if (is_host_scalar(a) && b.device().is_privateuseone()) {
		static const int mirror[] = {NEURON_CMP_EQ, NEURON_CMP_NE, NEURON_CMP_GT, NEURON_CMP_GE, NEURON_CMP_LT, NEURON_CMP_LE};
		return compare(name, mirror[fn], b, a);
	}
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), a.options().dtype(c10::kBool));
	return compare_into(name, fn, a, b, out);
}

Tensor scalar_tensor(const Scalar &s) { return at::scalar_tensor(s, at::TensorOptions().dtype(s.type())); }

#define CMP_FAMILY(name, FN)                                                                                         \
	Tensor name##_t(const Tensor &a, const Tensor &b) { NEURON_NATIVE(#name); return compare(#name, FN, a, b); } \
	Tensor name##_s(const Tensor &a, const Scalar &b) { NEURON_NATIVE(#name); return compare(#name, FN, a, scalar_tensor(b)); } \
	Tensor &name##_to(const Tensor &a, const Tensor &b, Tensor &o) { NEURON_NATIVE(#name); return compare_into(#name, FN, a, b, o); } \
	Tensor &name##_so(const Tensor &a, const Scalar &b, Tensor &o) { NEURON_NATIVE(#name); return compare_into(#name, FN, a, scalar_tensor(b), o); }

CMP_FAMILY(eq, NEURON_CMP_EQ)
CMP_FAMILY(ne, NEURON_CMP_NE)
CMP_FAMILY(lt, NEURON_CMP_LT)
CMP_FAMILY(le, NEURON_CMP_LE)
CMP_FAMILY(gt, NEURON_CMP_GT)
CMP_FAMILY(ge, NEURON_CMP_GE)

// ---- where / masked_fill ----

// A device tensor of dtype dt holding a (device or host) value, broadcastable.
Tensor as_device_dtype(const Tensor &t, c10::ScalarType dt, const Tensor &like)
{
	if (t.device().is_privateuseone())
		return t.scalar_type() == dt ? t : t.to(dt);
	if (t.dim() == 0) {
		Tensor d = at::empty({}, like.options().dtype(dt));
		fill_cmd(d, t.item());
		return d;
	}
	return t.to(like.device(), dt);
}


Tensor where_self(const Tensor &cond, const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("where");
	const c10::ScalarType dt = at::result_type(a, b);
	const Tensor &dev = cond.device().is_privateuseone() ? cond : (a.device().is_privateuseone() ? a : b);
	const auto shape = at::infer_size(at::infer_size(cond.sizes(), a.sizes()), b.sizes());
	Tensor out = at::empty(shape, dev_opts(dev, dt));
	if (!chip_ok(out)) {
		note_fallback("where");
		out.copy_(at::where(cond.cpu(), a.cpu(), b.cpu()));
		return out;
	}
	Tensor c = cond.scalar_type() == c10::kBool ? on_device(cond, out) : on_device(cond, out).to(c10::kBool);
	where_cmd(out, c, as_device_dtype(a, dt, out), as_device_dtype(b, dt, out));
	return out;
}

Tensor &masked_fill_i(Tensor &self, const Tensor &mask, const Scalar &v)
{
	NEURON_NATIVE("masked_fill");
	if (!chip_ok(self) || mask.scalar_type() != c10::kBool) {
		note_fallback("masked_fill");
		Tensor r = at::masked_fill(self.cpu(), mask.cpu(), v);
		self.copy_(r);
		return self;
	}
	Tensor val = at::empty({}, self.options());
	fill_cmd(val, v);
	where_cmd(self, on_device(mask, self), val, self);
	return self;
}
Tensor masked_fill_f(const Tensor &self, const Tensor &mask, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), mask.sizes())).clone();
	return masked_fill_i(out, mask, v);
}
Tensor &masked_fill_ti(Tensor &self, const Tensor &mask, const Tensor &v)
{
	TORCH_CHECK(v.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor");
	return masked_fill_i(self, mask, v.item());
}

// ---- log_softmax ----

Tensor log_softmax(const Tensor &self, int64_t dim, bool half_to_float)
{
	NEURON_NATIVE("_log_softmax");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	Tensor out = at::empty(self.sizes(), self.options().dtype(half_to_float ? c10::kFloat : self.scalar_type()));
	if (!float_dev(self)) {
		note_fallback("_log_softmax");
		out.copy_(at::_log_softmax(self.cpu(), dim, half_to_float));
		return out;
	}
	unary_op(NEURON_OP_LOG_SOFTMAX, out, self, d);
	return out;
}

// dx = g - exp(y) * sum(g, dim)
Tensor log_softmax_backward(const Tensor &g, const Tensor &y, int64_t dim, c10::ScalarType input_dtype)
{
	NEURON_NATIVE("_log_softmax_backward_data");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(y.dim(), 1));
	if (!float_dev(g) || !float_dev(y) || y.dim() == 0) {
		note_fallback("_log_softmax_backward_data");
		return at::_log_softmax_backward_data(g.cpu(), y.cpu(), dim, input_dtype).to(g.device());
	}
	std::vector<int64_t> ks(y.sizes().begin(), y.sizes().end());
	ks[d] = 1;
	Tensor s = at::empty(ks, g.options());
	reduce_cmd(NEURON_OP_SUM, s, g, int64_t{1} << d);
	Tensor e = at::empty(y.sizes(), g.options());
	unary_op(NEURON_OP_EXP, e, y);
	binary_op(NEURON_OP_MUL, e, e, s);
	binary_op(NEURON_OP_SUB, e, g, e);
	return input_dtype == e.scalar_type() ? e : e.to(input_dtype);
}

// ---- indexing ----


Tensor &index_select_o(const Tensor &self, int64_t dim, const Tensor &index, Tensor &out)
{
	NEURON_NATIVE("index_select");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
	Tensor ix = index.reshape({-1});
	std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
	if (self.dim() > 0)
		shape[d] = ix.numel();
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!chip_ok(self) || !chip_ok(out) || !index_ok(on_device(ix, out)) || out.scalar_type() != self.scalar_type()) {
		note_fallback("index_select");
		out.copy_(at::index_select(self.cpu(), dim, index.cpu()));
		return out;
	}
	if (out.numel() == 0)
		return out;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_INDEX_SELECT, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(self);
	cmd.operands[2] = desc(on_device(ix, out));
	cmd.iscalars[0] = d;
	submit(out, cmd);
	return out;
}
Tensor index_select(const Tensor &self, int64_t dim, const Tensor &index)
{
	Tensor out = at::empty({0}, self.options());
	return index_select_o(self, dim, index, out);
}

void index_add_cmd(const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src)
{
	if (src.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_INDEX_ADD, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(ix);
	cmd.operands[2] = desc(src);
	cmd.iscalars[0] = dim;
	submit(out, cmd);
}

Tensor embedding_dense_backward(const Tensor &grad, const Tensor &indices, int64_t num_weights, int64_t padding_idx,
				bool scale_grad_by_freq)
{
	NEURON_NATIVE("embedding_dense_backward");
	const int64_t dim = grad.size(-1);
	if (scale_grad_by_freq || !float_dev(grad) || !index_ok(indices)) {
		note_fallback("embedding_dense_backward");
		return at::embedding_dense_backward(grad.cpu(), indices.cpu(), num_weights, padding_idx, scale_grad_by_freq)
			.to(grad.device());
	}
	Tensor out = at::empty({num_weights, dim}, grad.options());
	fill_cmd(out, 0);
	index_add_cmd(out, 0, indices.reshape({-1}), grad.reshape({-1, dim}));
	if (padding_idx >= 0 && padding_idx < num_weights)
		fill_cmd(out.select(0, padding_idx), 0);
	return out;
}

Tensor gather(const Tensor &self, int64_t dim, const Tensor &index, bool sparse_grad)
{
	NEURON_NATIVE("gather");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	Tensor out = at::empty(index.sizes(), self.options());
	if (!chip_ok(self) || !index_ok(index) || index.dim() != self.dim()) {
		note_fallback("gather");
		out.copy_(at::gather(self.cpu(), dim, index.cpu(), sparse_grad));
		return out;
	}
	if (out.numel() == 0)
		return out;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_GATHER, 3);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(self);
	cmd.operands[2] = desc(index);
	cmd.iscalars[0] = d;
	submit(out, cmd);
	return out;
}


Tensor scatter_add_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src);
Tensor &scatter_add_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, Tensor &out)
{
	Tensor r = scatter_add_f(self, dim, index, src);
	if (out.sizes() != r.sizes())
		out.resize_(r.sizes());
	out.copy_(r);
	return out;
}
Tensor scatter_add_f(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src)
{
	NEURON_NATIVE("scatter_add");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!chip_ok(self) || !index_ok(index) || !chip_ok(src) || src.sizes() != index.sizes() ||
	    src.scalar_type() != self.scalar_type() || self.scalar_type() == c10::kBool) {
		note_fallback("scatter_add");
		return at::scatter_add(self.cpu(), dim, index.cpu(), src.cpu()).to(self.device());
	}
	Tensor out = self.clone(at::MemoryFormat::Contiguous);
	scatter_add_cmd(out, d, index, src);
	return out;
}

// ---- nll_loss (2-d input [N, C] or 1-d [C]; class dim 1) ----

enum { kNone = 0, kMean = 1, kSum = 2 };

// Per-sample weights: (target != ignore) * weight[target], and a safe target.
std::pair<Tensor, Tensor> nll_weights(const Tensor &input2, const Tensor &target1, const std::optional<Tensor> &weight,
				      int64_t ignore_index)
{
	const int64_t n = target1.numel();
	Tensor valid = at::empty({n}, input2.options().dtype(c10::kBool));
	Tensor tgt = target1.reshape({n});
	{
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
		cmd.operands[0] = desc(valid);
		cmd.operands[1] = desc(tgt);
		cmd.iscalars[0] = NEURON_CMP_NE;
		cmd.fscalars.f[0] = static_cast<double>(ignore_index);
		if (n)
			submit(valid, cmd);
	}
	Tensor zero = at::empty({}, tgt.options());
	fill_cmd(zero, 0);
	Tensor safe = at::empty({n}, tgt.options());
	where_cmd(safe, valid, tgt, zero);
	Tensor w = at::empty({n}, input2.options());
	if (n)
		copy_cast_into(w, valid);
	if (weight && weight->defined()) {
		Tensor ws = at::empty({n}, input2.options());
		index_select_o(*weight, 0, safe, ws);
		binary_op(NEURON_OP_MUL, w, w, ws);
	}
	return {w, safe};
}

} // namespace

void copy_cast_into(const Tensor &dst, const Tensor &src)
{
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COPY, 2);
	cmd.operands[0] = desc(dst);
	cmd.operands[1] = desc(src.expand(dst.sizes()));
	submit(dst, cmd);
}

namespace {

bool nll_ok(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight)
{
	return float_dev(self) && (self.dim() == 2 || self.dim() == 1) && index_ok(target) &&
	       (!weight || !weight->defined() || float_dev(*weight));
}

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
					    int64_t reduction, int64_t ignore_index)
{
	NEURON_NATIVE("nll_loss_forward");
	if (!nll_ok(self, target, weight)) {
		note_fallback("nll_loss_forward");
		auto [o, t] = at::nll_loss_forward(self.cpu(), target.cpu(),
						   weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
						   reduction, ignore_index);
		return {o.to(self.device()), t.to(self.device())};
	}
	Tensor in2 = self.dim() == 1 ? self.unsqueeze(0) : self;
	const int64_t n = in2.size(0);
	auto [w, safe] = nll_weights(in2, target, weight, ignore_index);
	Tensor picked = at::empty({n, 1}, self.options());
	if (n) {
		neuron_cmd cmd;
		cmd_init(cmd, NEURON_OP_GATHER, 3);
		cmd.operands[0] = desc(picked);
		cmd.operands[1] = desc(in2);
		cmd.operands[2] = desc(safe.view({n, 1}));
		cmd.iscalars[0] = 1;
		submit(picked, cmd);
	}
	Tensor losses = at::empty({n}, self.options());
	binary_op(NEURON_OP_MUL, losses, picked.view({n}), w);
	scalar_op(NEURON_OP_MUL_SCALAR, losses, losses, -1.0);
	Tensor total = at::empty({}, self.options());
	reduce_cmd(NEURON_OP_SUM, total.view({1}), w, 1);
	if (n == 0)
		fill_cmd(total, 0);
	if (reduction == kNone)
		return {self.dim() == 1 ? losses.view(c10::IntArrayRef{}) : losses, total};
	Tensor out = at::empty({}, self.options());
	if (n)
		reduce_cmd(NEURON_OP_SUM, out.view({1}), losses, 1);
	else
		fill_cmd(out, reduction == kMean ? NAN : 0.0);
	if (reduction == kMean && n)
		binary_op(NEURON_OP_DIV, out, out, total);
	return {out, total};
}

Tensor nll_loss_backward(const Tensor &grad, const Tensor &self, const Tensor &target, const std::optional<Tensor> &weight,
			 int64_t reduction, int64_t ignore_index, const Tensor &total_weight)
{
	NEURON_NATIVE("nll_loss_backward");
	if (!nll_ok(self, target, weight) || !float_dev(grad)) {
		note_fallback("nll_loss_backward");
		return at::nll_loss_backward(grad.cpu(), self.cpu(), target.cpu(),
					     weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
					     reduction, ignore_index, total_weight.cpu())
			.to(self.device());
	}
	Tensor in2 = self.dim() == 1 ? self.unsqueeze(0) : self;
	const int64_t n = in2.size(0);
	Tensor gi = at::empty(in2.sizes(), self.options());
	fill_cmd(gi, 0);
	if (n == 0)
		return gi.view(self.sizes());
	auto [w, safe] = nll_weights(in2, target, weight, ignore_index);
	Tensor src = at::empty({n}, self.options());
	// src = -w * grad (/ total_weight for mean)
	binary_op(NEURON_OP_MUL, src, w, reduction == kNone ? grad.reshape({n}) : grad.reshape({}).expand({n}));
	scalar_op(NEURON_OP_MUL_SCALAR, src, src, -1.0);
	if (reduction == kMean)
		binary_op(NEURON_OP_DIV, src, src, total_weight.reshape({}).expand({n}));
	scatter_add_cmd(gi, 1, safe.view({n, 1}), src.view({n, 1}));
	return gi.view(self.sizes());
}

// ---- layer norm (normalized over the last k dims) ----

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor &x_in, c10::IntArrayRef nshape, const std::optional<Tensor> &weight,
					      const std::optional<Tensor> &bias, double eps)
{
	NEURON_NATIVE("native_layer_norm");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x_in.dim();
	if (!float_dev(x_in) || nd == 0 || nd > NEURON_MAX_DIMS) {
		note_fallback("native_layer_norm");
		auto [o, m, r] = at::native_layer_norm(x_in.cpu(), nshape,
						       weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
						       bias && bias->defined() ? std::optional<Tensor>(bias->cpu()) : std::nullopt, eps);
		return {o.to(x_in.device()), m.to(x_in.device()), r.to(x_in.device())};
	}
	const Tensor x = x_in;
	int64_t mask = 0;
	for (int64_t i = nd - k; i < nd; ++i)
		mask |= int64_t{1} << i;
	const auto ks = keep_shape(x, mask);
	Tensor mean = at::empty(ks, x.options().dtype(c10::kFloat));
	reduce_cmd(NEURON_OP_MEAN, mean, x, mask);
	Tensor xc = at::empty(x.sizes(), x.options().dtype(c10::kFloat));
	binary_op(NEURON_OP_SUB, xc, x, mean);
	Tensor sq = at::empty(x.sizes(), xc.options());
	binary_op(NEURON_OP_MUL, sq, xc, xc);
	Tensor rstd = at::empty(ks, mean.options());
	reduce_cmd(NEURON_OP_MEAN, rstd, sq, mask);
	scalar_op(NEURON_OP_ADD_SCALAR, rstd, rstd, eps);
	math_cmd(rstd, rstd, NEURON_UNARY_RSQRT);
	Tensor out = at::empty(x.sizes(), x.options());
	binary_op(NEURON_OP_MUL, out, xc, rstd);
	if (weight && weight->defined())
		binary_op(NEURON_OP_MUL, out, out, *weight);
	if (bias && bias->defined())
		binary_op(NEURON_OP_ADD, out, out, *bias);
	return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor &go, const Tensor &x, c10::IntArrayRef nshape,
						       const Tensor &mean, const Tensor &rstd,
						       const std::optional<Tensor> &weight, const std::optional<Tensor> &bias,
						       std::array<bool, 3> mask3)
{
	NEURON_NATIVE("native_layer_norm_backward");
	const int64_t k = static_cast<int64_t>(nshape.size()), nd = x.dim();
	if (!float_dev(go) || !float_dev(x) || nd == 0) {
		note_fallback("native_layer_norm_backward");
		auto [a, b, c] = at::native_layer_norm_backward(
			go.cpu(), x.cpu(), nshape, mean.cpu(), rstd.cpu(),
			weight && weight->defined() ? std::optional<Tensor>(weight->cpu()) : std::nullopt,
			bias && bias->defined() ? std::optional<Tensor>(bias->cpu()) : std::nullopt, mask3);
		auto mv = [&](const Tensor &t) { return t.defined() ? t.to(x.device()) : t; };
		return {mv(a), mv(b), mv(c)};
	}
	int64_t inner = 0, outer = 0;
	for (int64_t i = 0; i < nd; ++i)
		(i >= nd - k ? inner : outer) |= int64_t{1} << i;
	const auto ks = keep_shape(x, inner);
	const auto opts = go.options();
	Tensor xhat = at::empty(x.sizes(), opts);
	binary_op(NEURON_OP_SUB, xhat, x, mean);
	binary_op(NEURON_OP_MUL, xhat, xhat, rstd);
	Tensor dx, dw, db;
	if (mask3[0]) {
		Tensor g = at::empty(x.sizes(), opts);
		if (weight && weight->defined())
			binary_op(NEURON_OP_MUL, g, go, *weight);
		else
			copy_cast_into(g, go);
		Tensor m1 = at::empty(ks, opts), m2 = at::empty(ks, opts), t = at::empty(x.sizes(), opts);
		reduce_cmd(NEURON_OP_MEAN, m1, g, inner);
		binary_op(NEURON_OP_MUL, t, g, xhat);
		reduce_cmd(NEURON_OP_MEAN, m2, t, inner);
		binary_op(NEURON_OP_MUL, t, xhat, m2);
		binary_op(NEURON_OP_SUB, g, g, m1);
		binary_op(NEURON_OP_SUB, g, g, t);
		binary_op(NEURON_OP_MUL, g, g, rstd);
		dx = g;
	}
	const std::vector<int64_t> wshape(nshape.begin(), nshape.end());
	if (mask3[1] && weight && weight->defined()) {
		Tensor t = at::empty(x.sizes(), opts);
		binary_op(NEURON_OP_MUL, t, go, xhat);
		dw = at::empty(keep_shape(x, outer), opts);
		reduce_cmd(NEURON_OP_SUM, dw, t, outer);
		dw = dw.view(wshape);
	}
	if (mask3[2] && bias && bias->defined()) {
		db = at::empty(keep_shape(x, outer), opts);
		reduce_cmd(NEURON_OP_SUM, db, go, outer);
		db = db.view(wshape);
	}
	return {dx, dw, db};
}

// ---- optimizer arithmetic ----

// self += w * (end - self)
Tensor &lerp_s_i(Tensor &self, const Tensor &end, const Scalar &w)
{
	NEURON_NATIVE("lerp");
	if (!float_dev(self) || !float_dev(end)) {
		note_fallback("lerp");
		self.copy_(at::lerp(self.cpu(), end.cpu(), w));
		return self;
	}
	Tensor d = at::empty(self.sizes(), self.options());
	binary_op(NEURON_OP_SUB, d, end, self);
	binary_op(NEURON_OP_ADD, self, self, d, w.toDouble());
	return self;
}

Tensor &addc_i(const char *name, int op, Tensor &self, const Tensor &t1, const Tensor &t2, const Scalar &v)
{
	if (!float_dev(self) || !chip_ok(t1) || !chip_ok(t2)) {
		note_fallback(name);
		Tensor r = op == NEURON_OP_MUL ? at::addcmul(self.cpu(), t1.cpu(), t2.cpu(), v)
					       : at::addcdiv(self.cpu(), t1.cpu(), t2.cpu(), v);
		self.copy_(r);
		return self;
	}
	Tensor t = at::empty(at::infer_size(t1.sizes(), t2.sizes()), self.options());
	binary_op(op, t, t1, t2);
	binary_op(NEURON_OP_ADD, self, self, t, v.toDouble());
	return self;
}
Tensor &addcmul_i(Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v) { NEURON_NATIVE("addcmul"); return addc_i("addcmul", NEURON_OP_MUL, self, a, b, v); }
Tensor &addcdiv_i(Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v) { NEURON_NATIVE("addcdiv"); return addc_i("addcdiv", NEURON_OP_DIV, self, a, b, v); }
Tensor addcmul_f(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), at::infer_size(a.sizes(), b.sizes()))).clone();
	return addcmul_i(out, a, b, v);
}
Tensor addcdiv_f(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &v)
{
	Tensor out = self.expand(at::infer_size(self.sizes(), at::infer_size(a.sizes(), b.sizes()))).clone();
	return addcdiv_i(out, a, b, v);
}

// ---- norms and variance ----

Tensor vector_norm(const Tensor &self, const Scalar &ord, at::OptionalIntArrayRef dim, bool keepdim,
		   std::optional<c10::ScalarType> dtype)
{
	NEURON_NATIVE("linalg_vector_norm");
	const double o = ord.toDouble();
	if (!float_dev(self) || (o != 2.0 && o != 1.0) || dtype) {
		note_fallback("linalg_vector_norm");
		return at::linalg_vector_norm(self.cpu(), ord, dim, keepdim, dtype).to(self.device());
	}
	Tensor t = at::empty(self.sizes(), self.options());
	if (o == 2.0)
		binary_op(NEURON_OP_MUL, t, self, self);
	else
		math_cmd(t, self, NEURON_UNARY_ABS);
	const int64_t mask = dim_mask(self, dim);
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

// ---- random numbers: the neuron generator's state drives CPU samplers ----

template <class F> Tensor &host_random(Tensor &self, const std::optional<at::Generator> &gen, F &&sample)
{
	NEURON_NATIVE("random");
	at::Generator g = gen && gen->defined() ? *gen : at::globalContext().defaultGenerator(self.device());
	TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1, "neuron: expected a neuron generator, got one for ",
		    g.device());
	at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>();
	Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU).dtype(
						     self.scalar_type() == c10::kBool ? c10::kFloat : self.scalar_type()));
	{
		std::lock_guard lock(g.mutex());
		cpu.set_state(g.get_state());
		sample(host, cpu);
		g.set_state(cpu.get_state());
	}
	self.copy_(host);
	return self;
}

Tensor &normal_i(Tensor &self, double mean, double std, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.normal_(mean, std, g); });
}
Tensor &uniform_i(Tensor &self, double from, double to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.uniform_(from, to, g); });
}
Tensor &bernoulli_fi(Tensor &self, double p, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.bernoulli_(p, g); });
}
Tensor &random_i(Tensor &self, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(g); });
}
Tensor &random_to_i(Tensor &self, int64_t to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(to, g); });
}
Tensor &random_from_i(Tensor &self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(from, to, g); });
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor &x, double p, std::optional<bool> train)
{
	NEURON_NATIVE("native_dropout");
	if (train.has_value() && !*train) {
		Tensor mask = at::empty(x.sizes(), x.options().dtype(c10::kBool));
		fill_cmd(mask, true);
		return {x.clone(), mask};
	}
	TORCH_CHECK(float_dev(x), "neuron: dropout needs a floating tensor");
	Tensor mask = at::empty(x.sizes(), x.options().dtype(c10::kBool));
	bernoulli_fi(mask, 1.0 - p, std::nullopt);
	Tensor out = at::empty(x.sizes(), x.options());
	binary_op(NEURON_OP_MUL, out, x, mask);
	scalar_op(NEURON_OP_MUL_SCALAR, out, out, p >= 1.0 ? 0.0 : 1.0 / (1.0 - p));
	return {out, mask};
}

Tensor native_dropout_backward(const Tensor &g, const Tensor &mask, double scale)
{
	NEURON_NATIVE("native_dropout_backward");
	Tensor out = at::empty(g.sizes(), g.options());
	binary_op(NEURON_OP_MUL, out, g, mask);
	scalar_op(NEURON_OP_MUL_SCALAR, out, out, scale);
	return out;
}


// ---- masks and predicates ----

// The triu/tril keep-mask of one (rows, cols, k, upper) on one device, made on the
// host once and kept: causal masks are rebuilt every forward pass, and a fresh
// host computation plus upload each time costs milliseconds on a busy host (an
// OpenMP region in CPU triu and a pinned staging block per upload).
Tensor tri_mask(bool upper, int64_t h, int64_t w, int64_t k, c10::Device dev)
{
	using Key = std::tuple<bool, int64_t, int64_t, int64_t, int>;
	static std::mutex mu;
	static auto *cache = new std::map<Key, Tensor>; // leaked: device tensors must not die at exit
	const Key key{upper, h, w, k, dev.index()};
	std::lock_guard lock(mu);
	if (auto it = cache->find(key); it != cache->end())
		return it->second;
	if (cache->size() >= 64)
		cache->clear(); // bounded: shapes rarely vary, but some callers sweep them
	Tensor ones = at::ones({h, w}, at::TensorOptions().dtype(c10::kBool));
	Tensor keep = (upper ? at::triu(ones, k) : at::tril(ones, k)).to(dev);
	// The mask may be used from any stream later: let its upload finish first.
	sync_stream(current_queues(dev.index()));
	cache->emplace(key, keep);
	return keep;
}

// triu/tril: where(keep, self, 0) with a cached device mask.
Tensor &tri_o(bool upper, const Tensor &self, int64_t k, Tensor &out)
{
	NEURON_NATIVE(upper ? "triu" : "tril");
	TORCH_CHECK(self.dim() >= 2, "triu/tril: input tensor must have at least 2 dimensions");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() != self.scalar_type()) {
		note_fallback(upper ? "triu" : "tril");
		out.copy_(upper ? at::triu(self.cpu(), k) : at::tril(self.cpu(), k));
		return out;
	}
	const int64_t h = self.size(-2), w = self.size(-1);
	Tensor keep = tri_mask(upper, h, w, k, self.device());
	Tensor zero = at::empty({}, self.options());
	fill_cmd(zero, 0);
	where_cmd(out, keep, self, zero);
	return out;
}
Tensor triu_f(const Tensor &self, int64_t k) { Tensor o = at::empty_like(self); return tri_o(true, self, k, o); }
Tensor tril_f(const Tensor &self, int64_t k) { Tensor o = at::empty_like(self); return tri_o(false, self, k, o); }
Tensor &triu_o(const Tensor &self, int64_t k, Tensor &o) { return tri_o(true, self, k, o); }
Tensor &tril_o(const Tensor &self, int64_t k, Tensor &o) { return tri_o(false, self, k, o); }
Tensor &triu_i(Tensor &self, int64_t k) { return tri_o(true, self, k, self); }
Tensor &tril_i(Tensor &self, int64_t k) { return tri_o(false, self, k, self); }

void cmp_scalar_cmd(const Tensor &out, const Tensor &a, int fn, double v)
{
	if (out.numel() == 0)
		return;
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COMPARE_SCALAR, 2);
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(a.expand(out.sizes()));
	cmd.iscalars[0] = fn;
	cmd.fscalars.f[0] = v;
	submit(out, cmd);
}

Tensor &isinf_sign_o(const char *name, double v, const Tensor &self, Tensor &out)
{
	NEURON_NATIVE(name);
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || out.scalar_type() != c10::kBool) {
		note_fallback(name);
		out.copy_(v < 0 ? at::isneginf(self.cpu()) : at::isposinf(self.cpu()));
		return out;
	}
	cmp_scalar_cmd(out, self, NEURON_CMP_EQ, v);
	return out;
}
Tensor &isneginf_o(const Tensor &self, Tensor &out) { return isinf_sign_o("isneginf", -INFINITY, self, out); }
Tensor &isposinf_o(const Tensor &self, Tensor &out) { return isinf_sign_o("isposinf", INFINITY, self, out); }

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
	if (!chip_ok(self) || out.scalar_type() != c10::kBool || self.dim() == 0 || self.numel() == 0) {
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

// sgn(x) = (x > 0) - (x < 0)
Tensor &sgn_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("sgn");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() == c10::kBool) {
		note_fallback("sgn");
		out.copy_(at::sgn(self.cpu()));
		return out;
	}
	Tensor p = at::empty(self.sizes(), self.options().dtype(c10::kBool)), n = at::empty_like(p);
	cmp_scalar_cmd(p, self, NEURON_CMP_GT, 0.0);
	cmp_scalar_cmd(n, self, NEURON_CMP_LT, 0.0);
	binary_op(NEURON_OP_SUB, out, p, n);
	return out;
}
Tensor sgn_f(const Tensor &self) { Tensor o = at::empty_like(self); return sgn_o(self, o); }
Tensor &sgn_i(Tensor &self) { return sgn_o(self, self); }

// logical ops on "!= 0" of each input
Tensor &logical_o(const char *name, int op, const Tensor &a, const Tensor &b, Tensor &out)
{
	NEURON_NATIVE(name);
	const auto shape = b.defined() ? at::infer_size(a.sizes(), b.sizes()) : a.sizes().vec();
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!chip_ok(a) || (b.defined() && !chip_ok(b)) || !chip_ok(out)) {
		note_fallback(name);
		Tensor r = op == 0 ? at::logical_not(a.cpu())
				   : op == 1 ? at::logical_and(a.cpu(), b.cpu())
				   : op == 2 ? at::logical_or(a.cpu(), b.cpu()) : at::logical_xor(a.cpu(), b.cpu());
		out.copy_(r);
		return out;
	}
	Tensor na = at::empty(shape, a.options().dtype(c10::kBool));
	cmp_scalar_cmd(na, a.expand(shape), op == 0 ? NEURON_CMP_EQ : NEURON_CMP_NE, 0.0);
	if (op == 0) {
		copy_cast_into(out, na);
		return out;
	}
	Tensor nb = at::empty(shape, a.options().dtype(c10::kBool));
	cmp_scalar_cmd(nb, b.expand(shape), NEURON_CMP_NE, 0.0);
	Tensor r = at::empty(shape, a.options().dtype(c10::kLong));
	binary_op(op == 1 ? NEURON_OP_MUL : NEURON_OP_ADD, r, na, nb);
	if (op == 3)
		cmp_scalar_cmd(na, r, NEURON_CMP_EQ, 1.0);
	else
		cmp_scalar_cmd(na, r, NEURON_CMP_NE, 0.0);
	copy_cast_into(out, na);
	return out;
}
Tensor &logical_not_o(const Tensor &a, Tensor &o) { return logical_o("logical_not", 0, a, Tensor(), o); }
Tensor &logical_and_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_and", 1, a, b, o); }
Tensor &logical_or_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_or", 2, a, b, o); }
Tensor &logical_xor_o(const Tensor &a, const Tensor &b, Tensor &o) { return logical_o("logical_xor", 3, a, b, o); }

Tensor &index_add_o(const Tensor &self, int64_t dim, const Tensor &index, const Tensor &src, const Scalar &alpha,
		    Tensor &out)
{
	NEURON_NATIVE("index_add");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (!chip_ok(self) || !chip_ok(src) || !index_ok(index) || self.scalar_type() == c10::kBool ||
	    src.scalar_type() != self.scalar_type()) {
		note_fallback("index_add");
		Tensor r = at::index_add(self.cpu(), dim, index.cpu(), src.cpu(), alpha);
		if (out.sizes() != r.sizes())
			out.resize_(r.sizes());
		out.copy_(r);
		return out;
	}
	if (!same_view(out, self)) {
		if (out.sizes() != self.sizes())
			out.resize_(self.sizes());
		out.copy_(self);
	}
	Tensor s = src;
	if (alpha.toDouble() != 1.0) {
		s = at::empty(src.sizes(), src.options());
		scalar_op(NEURON_OP_MUL_SCALAR, s, src, alpha);
	}
	index_add_cmd(out, d, index.reshape({-1}), s.dim() == 0 ? s.reshape({1}) : s);
	return out;
}

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

// x[idx] with one integer index tensor on the first dim: index_select (any other
// form of advanced indexing runs on the CPU).
Tensor wrap_index(const Tensor &ix, int64_t size);
Tensor index_t(const Tensor &self, const c10::List<std::optional<Tensor>> &indices)
{
	NEURON_NATIVE("index");
	if (indices.size() == 1 && self.dim() >= 1) {
		const std::optional<Tensor> ix = indices.get(0);
		if (ix && ix->defined() && ix->device().is_privateuseone() &&
		    (ix->scalar_type() == c10::kLong || ix->scalar_type() == c10::kInt) && chip_ok(self)) {
			// negative indices wrap, as in Python: idx + size * (idx < 0)
			Tensor fixed = wrap_index(*ix, self.size(0));
			Tensor out = at::empty({0}, self.options());
			index_select_o(self, 0, fixed, out);
			std::vector<int64_t> shape(ix->sizes().begin(), ix->sizes().end());
			shape.insert(shape.end(), self.sizes().begin() + 1, self.sizes().end());
			return out.view(shape);
		}
	}
	note_fallback("aten::index.Tensor");
	c10::List<std::optional<Tensor>> cpu_ix;
	for (size_t i = 0; i < indices.size(); ++i) {
		const std::optional<Tensor> t = indices.get(i);
		cpu_ix.push_back(t && t->defined() ? std::optional<Tensor>(t->cpu()) : std::nullopt);
	}
	return at::index(self.cpu(), cpu_ix).to(self.device());
}

Tensor wrap_index(const Tensor &ix, int64_t size)
{
	Tensor flat = ix.reshape({-1});
	Tensor negm = at::empty(flat.sizes(), flat.options().dtype(c10::kBool));
	cmp_scalar_cmd(negm, flat, NEURON_CMP_LT, 0.0);
	Tensor fixed = at::empty(flat.sizes(), flat.options());
	binary_op(NEURON_OP_MUL, fixed, negm, at::scalar_tensor(size, flat.options()));
	binary_op(NEURON_OP_ADD, fixed, fixed, flat);
	return fixed;
}

// self[idx] += values with one integer index on the first dim (the backward of x[idx]).
Tensor &index_put_impl(Tensor &self, const c10::List<std::optional<Tensor>> &indices, const Tensor &values,
		       bool accumulate, bool unsafe)
{
	NEURON_NATIVE("index_put_");
	if (accumulate && indices.size() == 1 && self.dim() >= 1 && chip_ok(self) && chip_ok(values) &&
	    values.scalar_type() == self.scalar_type() && self.scalar_type() != c10::kBool) {
		const std::optional<Tensor> ix = indices.get(0);
		if (ix && ix->defined() && ix->device().is_privateuseone() &&
		    (ix->scalar_type() == c10::kLong || ix->scalar_type() == c10::kInt)) {
			Tensor fixed = wrap_index(*ix, self.size(0));
			std::vector<int64_t> vshape{fixed.numel()};
			vshape.insert(vshape.end(), self.sizes().begin() + 1, self.sizes().end());
			std::vector<int64_t> full(ix->sizes().begin(), ix->sizes().end());
			full.insert(full.end(), self.sizes().begin() + 1, self.sizes().end());
			Tensor v = values.expand(full).contiguous().view(vshape);
			index_add_cmd(self, 0, fixed, v);
			return self;
		}
	}
	note_fallback("aten::_index_put_impl_");
	c10::List<std::optional<Tensor>> cpu_ix;
	for (size_t i = 0; i < indices.size(); ++i) {
		const std::optional<Tensor> t = indices.get(i);
		cpu_ix.push_back(t && t->defined() ? std::optional<Tensor>(t->cpu()) : std::nullopt);
	}
	Tensor c = self.cpu();
	at::_index_put_impl_(c, cpu_ix, values.cpu(), accumulate, unsafe);
	self.copy_(c);
	return self;
}

Tensor &where_o(const Tensor &cond, const Tensor &a, const Tensor &b, Tensor &out)
{
	Tensor r = where_self(cond, a, b);
	if (out.sizes() != r.sizes())
		out.resize_(r.sizes());
	out.copy_(r);
	return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("triu", &triu_f);
	m.impl("tril", &tril_f);
	m.impl("triu.out", &triu_o);
	m.impl("tril.out", &tril_o);
	m.impl("triu_", &triu_i);
	m.impl("tril_", &tril_i);
	m.impl("isneginf.out", &isneginf_o);
	m.impl("isposinf.out", &isposinf_o);
	m.impl("all", &all_f);
	m.impl("any", &any_f);
	m.impl("all.all_out", &all_o);
	m.impl("any.all_out", &any_o);
	m.impl("where.self_out", &where_o);
	m.impl("amin", &amin_f);
	m.impl("min", &min_all);
	m.impl("index.Tensor", &index_t);
	m.impl("_index_put_impl_", &index_put_impl);
	m.impl("sgn", &sgn_f);
	m.impl("sgn_", &sgn_i);
	m.impl("sgn.out", &sgn_o);
	m.impl("logical_not.out", &logical_not_o);
	m.impl("logical_and.out", &logical_and_o);
	m.impl("logical_or.out", &logical_or_o);
	m.impl("logical_xor.out", &logical_xor_o);
	m.impl("index_add.out", &index_add_o);
	m.impl("cat", &cat_f);
	m.impl("cat.out", &cat_o);
	m.impl("arange.start_out", &arange_o);
	m.impl("all.out", &all_dim_o);
	m.impl("any.out", &any_dim_o);
}

namespace {
} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
#define REG3(name, base) m.impl(#name, &base##_f); m.impl(#name "_", &base##_i); m.impl(#name ".out", &base##_o);
	REG3(log, log)
	REG3(sqrt, sqrt)
	REG3(rsqrt, rsqrt)
	REG3(erf, erf)
	REG3(reciprocal, reciprocal)
	REG3(sigmoid, sigmoid)
	REG3(abs, abs)
	m.impl("pow.Tensor_Scalar", &pow_ts);
	m.impl("pow_.Scalar", &pow_ts_i);
	m.impl("pow.Tensor_Scalar_out", &pow_ts_o);
	m.impl("pow.Tensor_Tensor", &pow_tt);
	m.impl("clamp", &clamp_f);
	m.impl("clamp_", &clamp_i);
	m.impl("clamp.out", &clamp_o);
	m.impl("clamp_min", &clamp_min_f);
	m.impl("clamp_min_", &clamp_min_i);
	m.impl("clamp_max", &clamp_max_f);
	m.impl("clamp_max_", &clamp_max_i);
	m.impl("maximum", &maximum);
	m.impl("minimum", &minimum);
	m.impl("gelu_backward", &gelu_backward);
	m.impl("threshold_backward", &threshold_backward);
#define REGCMP(n) m.impl(#n ".Tensor", &n##_t); m.impl(#n ".Scalar", &n##_s); m.impl(#n ".Tensor_out", &n##_to); m.impl(#n ".Scalar_out", &n##_so);
	REGCMP(eq) REGCMP(ne) REGCMP(lt) REGCMP(le) REGCMP(gt) REGCMP(ge)
	m.impl("where.self", &where_self);
	m.impl("masked_fill.Scalar", &masked_fill_f);
	m.impl("masked_fill_.Scalar", &masked_fill_i);
	m.impl("masked_fill_.Tensor", &masked_fill_ti);
	m.impl("_log_softmax", &log_softmax);
	m.impl("_log_softmax_backward_data", &log_softmax_backward);
	m.impl("index_select", &index_select);
	m.impl("index_select.out", &index_select_o);
	m.impl("embedding_dense_backward", &embedding_dense_backward);
	m.impl("gather", &gather);
	m.impl("scatter_add", &scatter_add_f);
	m.impl("scatter_add.out", &scatter_add_o);
	m.impl("nll_loss_forward", &nll_loss_forward);
	m.impl("nll_loss_backward", &nll_loss_backward);
	m.impl("native_layer_norm", &layer_norm);
	m.impl("native_layer_norm_backward", &layer_norm_backward);
	m.impl("lerp_.Scalar", &lerp_s_i);
	m.impl("addcmul_", &addcmul_i);
	m.impl("addcdiv_", &addcdiv_i);
	m.impl("addcmul", &addcmul_f);
	m.impl("addcdiv", &addcdiv_f);
	m.impl("linalg_vector_norm", &vector_norm);
	m.impl("var.correction", &var_c);
	m.impl("std.correction", &std_c);
	m.impl("normal_", &normal_i);
	m.impl("uniform_", &uniform_i);
	m.impl("bernoulli_.float", &bernoulli_fi);
	m.impl("random_", &random_i);
	m.impl("random_.to", &random_to_i);
	m.impl("random_.from", &random_from_i);
	m.impl("native_dropout", &native_dropout);
	m.impl("native_dropout_backward", &native_dropout_backward);
}

} // namespace torch_neuron
