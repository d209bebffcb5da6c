// Native kernels: each ATen op becomes one or a few chip commands (runtime/kernels).
// Ops whose arguments the chip cannot take (dtype, rank) go to the CPU through
// note_fallback() + a host computation, exactly as the boxed fallback would.
#include "cmds.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {


Tensor host_result(const char *name, const Tensor &r_cpu, const Tensor &like)
{
	(void)name;
	return r_cpu.to(like.device());
}

// ---- fill / zero ----

Tensor &fill_scalar(Tensor &self, const Scalar &v)
{
	NEURON_NATIVE("fill_");
	if (!chip_ok(self)) {
		note_fallback("fill_.Scalar");
		self.copy_(at::full(self.sizes(), v, self.options().device(c10::kCPU)));
		return self;
	}
	fill_cmd(self, v);
	return self;
}

Tensor &fill_tensor(Tensor &self, const Tensor &v)
{
	TORCH_CHECK(v.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", v.dim(), " dimensions.");
	if (v.device().is_cpu())
		return fill_scalar(self, v.item());
	NEURON_NATIVE("fill_");
	self.copy_(v.expand(self.sizes()));
	return self;
}

Tensor &zero_(Tensor &self) { return fill_scalar(self, 0); }

// ---- binary arithmetic ----

c10::ScalarType binary_dtype(int op, const Tensor &a, const Tensor &b)
{
	c10::ScalarType dt = at::result_type(a, b);
	if (op == NEURON_OP_DIV && (at::isIntegralType(dt, true)))
		dt = c10::typeMetaToScalarType(c10::get_default_dtype());
	return dt;
}

const char *op_label(int op)
{
	switch (op) {
	case NEURON_OP_ADD: return "add";
	case NEURON_OP_SUB: return "sub";
	case NEURON_OP_MUL: return "mul";
	default: return "div";
	}
}

int scalar_form(int op) { return op - NEURON_OP_ADD + NEURON_OP_ADD_SCALAR; }

// out = a (op) alpha*b, out already has the broadcast shape and its dtype.
void binary_into(int op, Tensor &out, const Tensor &a, const Tensor &b, const Scalar &alpha)
{
	const double al = alpha.toDouble();
	const bool fl = at::isFloatingType(out.scalar_type());
	const bool host_ok = chip_ok(out) && (a.device().is_privateuseone() ? chip_ok(a) : is_host_scalar(a)) &&
			     (b.device().is_privateuseone() ? chip_ok(b) : is_host_scalar(b)) &&
			     !(is_host_scalar(a) && is_host_scalar(b)) &&
			     !(out.scalar_type() == c10::kBool && (op == NEURON_OP_SUB || op == NEURON_OP_DIV)) &&
			     (fl || std::trunc(al) == al);
	if (!host_ok) {
		note_fallback(op_label(op));
		Tensor ac = a.cpu(), bc = b.cpu(), r;
		switch (op) {
		case NEURON_OP_ADD: r = at::add(ac, bc, alpha); break;
		case NEURON_OP_SUB: r = at::sub(ac, bc, alpha); break;
		case NEURON_OP_MUL: r = at::mul(ac, bc); break;
		default: r = at::div(ac, bc); break;
		}
		out.copy_(r);
		return;
	}
	if (is_host_scalar(b)) {
		Scalar s = b.item();
		if (op == NEURON_OP_ADD || op == NEURON_OP_SUB)
			s = fl ? Scalar(s.toDouble() * al) : Scalar(s.toLong() * static_cast<int64_t>(al));
		scalar_op(scalar_form(op), out, a, s);
		return;
	}
	if (is_host_scalar(a)) {
		const Scalar s = a.item();
		if (op == NEURON_OP_ADD && al == 1.0) {
			scalar_op(NEURON_OP_ADD_SCALAR, out, b, s);
		} else if (op == NEURON_OP_MUL) {
			scalar_op(NEURON_OP_MUL_SCALAR, out, b, s);
		} else if (op == NEURON_OP_DIV) {
			scalar_op(NEURON_OP_DIV_SCALAR, out, b, s, true);
		} else if (op == NEURON_OP_SUB && al == 1.0) {
			scalar_op(NEURON_OP_SUB_SCALAR, out, b, s, true);
		} else {
			Tensor ad = at::empty(out.sizes(), out.options());
			fill_cmd(ad, s);
			binary_op(op, out, ad, b, al);
		}
		return;
	}
	binary_op(op, out, a, b, al);
}

Tensor binary(int op, const Tensor &a, const Tensor &b, const Scalar &alpha)
{
	const c10::ScalarType dt = binary_dtype(op, a, b);
	const Tensor &dev = a.device().is_privateuseone() ? a : b;
	Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), dev_opts(dev, dt));
	binary_into(op, out, a, b, alpha);
	return out;
}

Tensor &binary_(int op, Tensor &self, const Tensor &b, const Scalar &alpha)
{
	const c10::ScalarType dt = binary_dtype(op, self, b);
	TORCH_CHECK(c10::canCast(dt, self.scalar_type()), "result type ", dt, " can't be cast to the desired output type ",
		    self.scalar_type());
	TORCH_CHECK(at::infer_size(self.sizes(), b.sizes()) == self.sizes(), "output with shape ", self.sizes(),
		    " doesn't match the broadcast shape ", at::infer_size(self.sizes(), b.sizes()));
	binary_into(op, self, self, b, alpha);
	return self;
}

Tensor &binary_out(int op, const Tensor &a, const Tensor &b, const Scalar &alpha, Tensor &out)
{
	const auto shape = at::infer_size(a.sizes(), b.sizes());
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	binary_into(op, out, a, b, alpha);
	return out;
}

#define BINARY_FAMILY(name, OP)                                                                                     \
	Tensor name##_t(const Tensor &a, const Tensor &b) { NEURON_NATIVE(#name); return binary(OP, a, b, 1); }     \
	Tensor &name##_t_(Tensor &a, const Tensor &b) { NEURON_NATIVE(#name); return binary_(OP, a, b, 1); }        \
	Tensor &name##_out(const Tensor &a, const Tensor &b, Tensor &o) { NEURON_NATIVE(#name); return binary_out(OP, a, b, 1, o); }

BINARY_FAMILY(mul, NEURON_OP_MUL)
BINARY_FAMILY(div, NEURON_OP_DIV)

Tensor add_t(const Tensor &a, const Tensor &b, const Scalar &al) { NEURON_NATIVE("add"); return binary(NEURON_OP_ADD, a, b, al); }
Tensor &add_t_(Tensor &a, const Tensor &b, const Scalar &al) { NEURON_NATIVE("add"); return binary_(NEURON_OP_ADD, a, b, al); }
Tensor &add_out(const Tensor &a, const Tensor &b, const Scalar &al, Tensor &o) { NEURON_NATIVE("add"); return binary_out(NEURON_OP_ADD, a, b, al, o); }
Tensor sub_t(const Tensor &a, const Tensor &b, const Scalar &al) { NEURON_NATIVE("sub"); return binary(NEURON_OP_SUB, a, b, al); }
Tensor &sub_t_(Tensor &a, const Tensor &b, const Scalar &al) { NEURON_NATIVE("sub"); return binary_(NEURON_OP_SUB, a, b, al); }
Tensor &sub_out(const Tensor &a, const Tensor &b, const Scalar &al, Tensor &o) { NEURON_NATIVE("sub"); return binary_out(NEURON_OP_SUB, a, b, al, o); }
Tensor rsub_t(const Tensor &a, const Tensor &b, const Scalar &al) { NEURON_NATIVE("rsub"); return binary(NEURON_OP_SUB, b, a, al); }

// ---- unary ----

template <typename CpuFn>
Tensor &unary_into(const char *name, int op, Tensor &out, const Tensor &self, CpuFn cpu, int64_t i0 = 0)
{
	const bool ok = chip_ok(self) && chip_ok(out) &&
			(op == NEURON_OP_RELU ? out.scalar_type() != c10::kBool : at::isFloatingType(out.scalar_type()));
	if (!ok) {
		note_fallback(name);
		out.copy_(cpu(self.cpu()));
		return out;
	}
	unary_op(op, out, self, i0);
	return out;
}

#define UNARY_FAMILY(name, OP, cpuexpr)                                                                         \
	Tensor name##_f(const Tensor &self)                                                                     \
	{                                                                                                       \
		NEURON_NATIVE(#name);                                                                           \
		Tensor out = OP == NEURON_OP_RELU ? at::empty_like(self) : float_out_like(self);                \
		return unary_into(#name, OP, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}                                                                                                       \
	Tensor &name##_i(Tensor &self)                                                                          \
	{                                                                                                       \
		NEURON_NATIVE(#name);                                                                           \
		return unary_into(#name, OP, self, self, [](const Tensor &x) { return cpuexpr; });            \
	}                                                                                                       \
	Tensor &name##_o(const Tensor &self, Tensor &out)                                                      \
	{                                                                                                       \
		NEURON_NATIVE(#name);                                                                           \
		if (out.sizes() != self.sizes())                                                                \
			out.resize_(self.sizes());                                                              \
		return unary_into(#name, OP, out, self, [](const Tensor &x) { return cpuexpr; });             \
	}

UNARY_FAMILY(relu, NEURON_OP_RELU, at::relu(x))
UNARY_FAMILY(tanh, NEURON_OP_TANH, at::tanh(x))
UNARY_FAMILY(exp, NEURON_OP_EXP, at::exp(x))
UNARY_FAMILY(silu, NEURON_OP_SILU, at::silu(x))

int64_t gelu_mode(c10::string_view approximate) { return approximate == "tanh" ? 1 : 0; }

Tensor gelu_f(const Tensor &self, c10::string_view approx)
{
	NEURON_NATIVE("gelu");
	Tensor out = float_out_like(self);
	const std::string a(approx);
	return unary_into("gelu", NEURON_OP_GELU, out, self, [&](const Tensor &x) { return at::gelu(x, a); },
			  gelu_mode(approx));
}
Tensor &gelu_i(Tensor &self, c10::string_view approx)
{
	NEURON_NATIVE("gelu");
	const std::string a(approx);
	return unary_into("gelu", NEURON_OP_GELU, self, self, [&](const Tensor &x) { return at::gelu(x, a); },
			  gelu_mode(approx));
}
Tensor &gelu_o(const Tensor &self, c10::string_view approx, Tensor &out)
{
	NEURON_NATIVE("gelu");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	const std::string a(approx);
	return unary_into("gelu", NEURON_OP_GELU, out, self, [&](const Tensor &x) { return at::gelu(x, a); },
			  gelu_mode(approx));
}

Tensor &neg_o(const Tensor &self, Tensor &out)
{
	NEURON_NATIVE("neg");
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!chip_ok(self) || !chip_ok(out) || out.scalar_type() == c10::kBool) {
		note_fallback("neg");
		out.copy_(at::neg(self.cpu()));
		return out;
	}
	scalar_op(NEURON_OP_MUL_SCALAR, out, self, -1);
	return out;
}
Tensor neg_f(const Tensor &self)
{
	Tensor out = at::empty_like(self);
	return neg_o(self, out);
}
Tensor &neg_i(Tensor &self) { return neg_o(self, self); }

// ---- activation backwards composed from chip ops ----

Tensor tanh_backward(const Tensor &g, const Tensor &y)
{
	NEURON_NATIVE("tanh_backward");
	if (!float_dev(g) || !float_dev(y)) {
		note_fallback("tanh_backward");
		return at::tanh_backward(g.cpu(), y.cpu()).to(g.device());
	}
	Tensor t = at::empty(at::infer_size(g.sizes(), y.sizes()), g.options());
	binary_op(NEURON_OP_MUL, t, y, y);
	scalar_op(NEURON_OP_SUB_SCALAR, t, t, 1.0, true);
	binary_op(NEURON_OP_MUL, t, t, g);
	return t;
}

Tensor sigmoid_backward(const Tensor &g, const Tensor &y)
{
	NEURON_NATIVE("sigmoid_backward");
	if (!float_dev(g) || !float_dev(y)) {
		note_fallback("sigmoid_backward");
		return at::sigmoid_backward(g.cpu(), y.cpu()).to(g.device());
	}
	Tensor t = at::empty(at::infer_size(g.sizes(), y.sizes()), g.options());
	scalar_op(NEURON_OP_SUB_SCALAR, t, y, 1.0, true);
	binary_op(NEURON_OP_MUL, t, t, y);
	binary_op(NEURON_OP_MUL, t, t, g);
	return t;
}

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)
Tensor silu_backward(const Tensor &g, const Tensor &x)
{
	NEURON_NATIVE("silu_backward");
	if (!float_dev(g) || !float_dev(x)) {
		note_fallback("silu_backward");
		return at::silu_backward(g.cpu(), x.cpu()).to(g.device());
	}
	Tensor s = at::sigmoid(x);
	Tensor t = at::empty(at::infer_size(g.sizes(), x.sizes()), g.options());
	scalar_op(NEURON_OP_SUB_SCALAR, t, s, 1.0, true);
	binary_op(NEURON_OP_MUL, t, t, x);
	scalar_op(NEURON_OP_ADD_SCALAR, t, t, 1.0);
	binary_op(NEURON_OP_MUL, t, t, s);
	binary_op(NEURON_OP_MUL, t, t, g);
	return t;
}

// ---- matmul family ----

bool mm_ok(const Tensor &o, const Tensor &a, const Tensor &b)
{
	return float_dev(o) && float_dev(a) && float_dev(b) && a.scalar_type() == o.scalar_type() &&
	       b.scalar_type() == o.scalar_type();
}

Tensor &mm_out(const Tensor &a, const Tensor &b, Tensor &out)
{
	NEURON_NATIVE("mm");
	TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors");
	TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
		    " and ", b.size(0), "x", b.size(1), ")");
	if (out.sizes() != c10::IntArrayRef({a.size(0), b.size(1)}))
		out.resize_({a.size(0), b.size(1)});
	if (!mm_ok(out, a, b)) {
		note_fallback("mm");
		out.copy_(at::mm(a.cpu(), b.cpu()));
		return out;
	}
	matmul_cmd(out, a, b, 1.0, 0.0);
	return out;
}
Tensor mm(const Tensor &a, const Tensor &b)
{
	Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::result_type(a, b)));
	return mm_out(a, b, out);
}

Tensor &bmm_out(const Tensor &a, const Tensor &b, Tensor &out)
{
	NEURON_NATIVE("bmm");
	TORCH_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors");
	TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: shapes cannot be multiplied");
	if (out.sizes() != c10::IntArrayRef({a.size(0), a.size(1), b.size(2)}))
		out.resize_({a.size(0), a.size(1), b.size(2)});
	if (!mm_ok(out, a, b)) {
		note_fallback("bmm");
		out.copy_(at::bmm(a.cpu(), b.cpu()));
		return out;
	}
	matmul_cmd(out, a, b, 1.0, 0.0);
	return out;
}
Tensor bmm(const Tensor &a, const Tensor &b)
{
	Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options().dtype(at::result_type(a, b)));
	return bmm_out(a, b, out);
}

Tensor &addmm_out(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta, const Scalar &alpha,
		  Tensor &out)
{
	NEURON_NATIVE("addmm");
	TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "addmm: mat1 and mat2 shapes cannot be multiplied (",
		    a.sizes(), " and ", b.sizes(), ")");
	const std::vector<int64_t> shape{a.size(0), b.size(1)};
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!mm_ok(out, a, b) || !self.device().is_privateuseone()) {
		note_fallback("addmm");
		out.copy_(at::addmm(self.cpu(), a.cpu(), b.cpu(), beta, alpha));
		return out;
	}
	const double be = beta.toDouble();
	if (be != 0 && !same_view(self, out)) {
		bias_matmul_cmd(out, a, b, self.expand(shape), alpha.toDouble(), be);
		return out;
	}
	matmul_cmd(out, a, b, alpha.toDouble(), be);
	return out;
}
Tensor addmm(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta, const Scalar &alpha)
{
	Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
	return addmm_out(self, a, b, beta, alpha, out);
}
Tensor &addmm_(Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta, const Scalar &alpha)
{
	return addmm_out(self, a, b, beta, alpha, self);
}

Tensor &baddbmm_out(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta, const Scalar &alpha,
		    Tensor &out)
{
	NEURON_NATIVE("baddbmm");
	const std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	if (!mm_ok(out, a, b) || !self.device().is_privateuseone()) {
		note_fallback("baddbmm");
		out.copy_(at::baddbmm(self.cpu(), a.cpu(), b.cpu(), beta, alpha));
		return out;
	}
	const double be = beta.toDouble();
	if (be != 0 && !same_view(self, out)) {
		bias_matmul_cmd(out, a, b, self.expand(shape), alpha.toDouble(), be);
		return out;
	}
	matmul_cmd(out, a, b, alpha.toDouble(), be);
	return out;
}
Tensor baddbmm(const Tensor &self, const Tensor &a, const Tensor &b, const Scalar &beta, const Scalar &alpha)
{
	Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
	return baddbmm_out(self, a, b, beta, alpha, out);
}

// ---- reductions ----

Tensor &reduce_out(const char *name, int op, const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
		   Tensor &out)
{
	const int64_t mask = dim_mask(self, dims);
	const auto ks = keep_shape(self, mask);
	const auto shape = keepdim ? ks : drop_shape(self, mask);
	if (out.sizes() != c10::IntArrayRef(shape))
		out.resize_(shape);
	bool ok = chip_ok(self) && chip_ok(out);
	if (op == NEURON_OP_MEAN)
		ok = ok && at::isFloatingType(out.scalar_type());
	if (op == NEURON_OP_SUM)
		ok = ok && out.scalar_type() != c10::kBool;
	if (op == NEURON_OP_AMAX)
		ok = ok && out.scalar_type() == self.scalar_type();
	if (!ok) {
		note_fallback(name);
		Tensor c = self.cpu(), r;
		std::vector<int64_t> dv;
		for (int64_t i = 0; i < self.dim(); ++i)
			if ((mask >> i) & 1)
				dv.push_back(i);
		if (op == NEURON_OP_SUM)
			r = at::sum(c, dv, keepdim, out.scalar_type());
		else if (op == NEURON_OP_MEAN)
			r = at::mean(c.to(out.scalar_type()), dv, keepdim);
		else
			r = at::amax(c, dv, keepdim);
		out.copy_(r);
		return out;
	}
	Tensor target = out.is_contiguous() ? out.view(ks) : at::empty(ks, out.options());
	reduce_cmd(op, target, self, mask);
	if (!target.is_same(out) && target.data_ptr() != out.data_ptr())
		out.copy_(target.view(shape));
	return out;
}

c10::ScalarType sum_dtype(const Tensor &self, std::optional<c10::ScalarType> dtype)
{
	if (dtype)
		return *dtype;
	return at::isIntegralType(self.scalar_type(), true) ? c10::kLong : self.scalar_type();
}

Tensor sum_dim(const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype)
{
	NEURON_NATIVE("sum");
	Tensor out = at::empty({0}, self.options().dtype(sum_dtype(self, dtype)));
	return reduce_out("sum", NEURON_OP_SUM, self, dims, keepdim, out);
}
Tensor &sum_out(const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype,
		Tensor &out)
{
	NEURON_NATIVE("sum");
	return reduce_out("sum", NEURON_OP_SUM, self, dims, keepdim, out);
}
Tensor mean_dim(const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype)
{
	NEURON_NATIVE("mean");
	c10::ScalarType dt = dtype.value_or(self.scalar_type());
	TORCH_CHECK(at::isFloatingType(dt) || at::isComplexType(dt),
		    "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
		    "Got: ", dt);
	Tensor out = at::empty({0}, self.options().dtype(dt));
	return reduce_out("mean", NEURON_OP_MEAN, self, dims, keepdim, out);
}
Tensor &mean_out(const Tensor &self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype,
		 Tensor &out)
{
	NEURON_NATIVE("mean");
	return reduce_out("mean", NEURON_OP_MEAN, self, dims, keepdim, out);
}
Tensor amax_nt(const Tensor &self, c10::IntArrayRef dims, bool keepdim)
{
	NEURON_NATIVE("amax");
	Tensor out = at::empty({0}, self.options());
	return reduce_out("amax", NEURON_OP_AMAX, self, dims, keepdim, out);
}
Tensor &amax_out(const Tensor &self, c10::IntArrayRef dims, bool keepdim, Tensor &out)
{
	NEURON_NATIVE("amax");
	return reduce_out("amax", NEURON_OP_AMAX, self, dims, keepdim, out);
}
Tensor max_all(const Tensor &self)
{
	TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
	return amax_nt(self, {}, false);
}

// ---- softmax ----

Tensor &softmax_out(const Tensor &self, int64_t dim, bool half_to_float, Tensor &out)
{
	NEURON_NATIVE("_softmax");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
	if (out.sizes() != self.sizes())
		out.resize_(self.sizes());
	if (!float_dev(self) || !float_dev(out)) {
		note_fallback("_softmax");
		out.copy_(at::_softmax(self.cpu(), dim, half_to_float));
		return out;
	}
	// The chip's softmax reads a whole row before writing it: an input that is (or
	// overlaps) the output (at::_softmax_out(x, x), as multi-head attention's fast
	// path calls it) is read from a copy.
	unary_op(NEURON_OP_SOFTMAX, out, mem_overlap(self, out) ? self.clone() : self, d);
	return out;
}
Tensor softmax(const Tensor &self, int64_t dim, bool half_to_float)
{
	Tensor out = at::empty(self.sizes(), self.options().dtype(half_to_float ? c10::kFloat : self.scalar_type()));
	return softmax_out(self, dim, half_to_float, out);
}

// dx = y * (g - sum(g * y, dim))
Tensor softmax_backward(const Tensor &g, const Tensor &y, int64_t dim, c10::ScalarType input_dtype)
{
	NEURON_NATIVE("_softmax_backward_data");
	const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(y.dim(), 1));
	if (!float_dev(g) || !float_dev(y) || y.dim() == 0) {
		note_fallback("_softmax_backward_data");
		return at::_softmax_backward_data(g.cpu(), y.cpu(), dim, input_dtype).to(g.device());
	}
	Tensor gy = at::empty(y.sizes(), g.options());
	binary_op(NEURON_OP_MUL, gy, g, y);
	std::vector<int64_t> ks(y.sizes().begin(), y.sizes().end());
	ks[d] = 1;
	Tensor s = at::empty(ks, g.options());
	reduce_cmd(NEURON_OP_SUM, s, gy, int64_t{1} << d);
	binary_op(NEURON_OP_SUB, gy, g, s);
	binary_op(NEURON_OP_MUL, gy, gy, y);
	return input_dtype == gy.scalar_type() ? gy : gy.to(input_dtype);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("fill_.Scalar", &fill_scalar);
	m.impl("fill_.Tensor", &fill_tensor);
	m.impl("zero_", &zero_);

	m.impl("add.Tensor", &add_t);
	m.impl("add_.Tensor", &add_t_);
	m.impl("add.out", &add_out);
	m.impl("sub.Tensor", &sub_t);
	m.impl("sub_.Tensor", &sub_t_);
	m.impl("sub.out", &sub_out);
	m.impl("rsub.Tensor", &rsub_t);
	m.impl("mul.Tensor", &mul_t);
	m.impl("mul_.Tensor", &mul_t_);
	m.impl("mul.out", &mul_out);
	m.impl("div.Tensor", &div_t);
	m.impl("div_.Tensor", &div_t_);
	m.impl("div.out", &div_out);
	m.impl("neg", &neg_f);
	m.impl("neg_", &neg_i);
	m.impl("neg.out", &neg_o);

	m.impl("relu", &relu_f);
	m.impl("relu_", &relu_i);
	m.impl("tanh", &tanh_f);
	m.impl("tanh_", &tanh_i);
	m.impl("tanh.out", &tanh_o);
	m.impl("exp", &exp_f);
	m.impl("exp_", &exp_i);
	m.impl("exp.out", &exp_o);
	m.impl("silu", &silu_f);
	m.impl("silu_", &silu_i);
	m.impl("silu.out", &silu_o);
	m.impl("gelu", &gelu_f);
	m.impl("gelu_", &gelu_i);
	m.impl("gelu.out", &gelu_o);
	m.impl("tanh_backward", &tanh_backward);
	m.impl("sigmoid_backward", &sigmoid_backward);
	m.impl("silu_backward", &silu_backward);

	m.impl("mm", &mm);
	m.impl("mm.out", &mm_out);
	m.impl("bmm", &bmm);
	m.impl("bmm.out", &bmm_out);
	m.impl("addmm", &addmm);
	m.impl("addmm_", &addmm_);
	m.impl("addmm.out", &addmm_out);
	m.impl("baddbmm", &baddbmm);
	m.impl("baddbmm.out", &baddbmm_out);

	m.impl("sum.dim_IntList", &sum_dim);
	m.impl("sum.IntList_out", &sum_out);
	m.impl("mean.dim", &mean_dim);
	m.impl("mean.out", &mean_out);
	m.impl("amax", &amax_nt);
	m.impl("amax.out", &amax_out);
	m.impl("max", &max_all);

	m.impl("_softmax", &softmax);
	m.impl("_softmax.out", &softmax_out);
	m.impl("_softmax_backward_data", &softmax_backward);
}

} // namespace torch_neuron
