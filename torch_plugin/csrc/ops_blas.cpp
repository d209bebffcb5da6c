// BLAS level 1-2 ops as chip matmuls: dot / vdot ([1, K] x [K, 1]), mv and addmv
// ([M, K] x [K, 1], beta and alpha folded into the MATMUL command), addr (an
// outer product added to self), and trace (the diagonal as a strided view, summed).
#include "cmds.h"

#include <ATen/Functions.h>
#include <torch/library.h>

namespace torch_neuron {

namespace {

bool mm_dtypes_ok(const Tensor &a, const Tensor &b)
{
	return float_dev(a) && float_dev(b) && a.scalar_type() == b.scalar_type();
}

Tensor dot_f(const Tensor &a, const Tensor &b)
{
	NEURON_NATIVE("dot");
	TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
	TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
		    a.scalar_type(), " and ", b.scalar_type());
	TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
		    "] and src [", b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ",
		    b.numel(), " elements respectively");
	if (!mm_dtypes_ok(a, b)) {
		note_fallback("dot");
		return at::dot(a.cpu(), b.cpu()).to(a.device());
	}
	Tensor out = at::empty({1, 1}, a.options());
	matmul_cmd(out, a.view({1, -1}), b.view({-1, 1}), 1.0, 0.0);
	return out.view(c10::IntArrayRef{});
}
Tensor &dot_o(const Tensor &a, const Tensor &b, Tensor &out) { return assign_out(out, dot_f(a, b)); }
Tensor vdot_f(const Tensor &a, const Tensor &b)
{
	TORCH_CHECK(!a.is_complex(), "neuron: complex tensors are not supported (vdot)");
	return dot_f(a, b);
}
Tensor &vdot_o(const Tensor &a, const Tensor &b, Tensor &out) { return assign_out(out, vdot_f(a, b)); }

Tensor &addmv_o(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta, const Scalar &alpha,
		Tensor &out)
{
	NEURON_NATIVE("addmv");
	TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ",
		    mat.dim(), ", ", vec.dim());
	TORCH_CHECK(mat.size(1) == vec.size(0) && (self.numel() == 1 || self.numel() == mat.size(0) || self.dim() <= 1),
		    "size mismatch, got input (", self.sizes(), "), mat (", mat.sizes(), "), vec (", vec.sizes(), ")");
	const int64_t m = mat.size(0);
	const double be = beta.toDouble();
	if (!mm_dtypes_ok(mat, vec) || (be != 0 && !chip_ok(self))) {
		note_fallback("addmv");
		return assign_out(out, at::addmv(self.cpu(), mat.cpu(), vec.cpu(), beta, alpha));
	}
	Tensor r = at::empty({m, 1}, mat.options());
	if (be != 0)
		r.view({m}).copy_(self.expand({m}));
	matmul_cmd(r, mat, vec.view({-1, 1}), alpha.toDouble(), be);
	return assign_out(out, r.view({m}));
}
Tensor addmv_f(const Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta, const Scalar &alpha)
{
	Tensor out = at::empty({0}, mat.options());
	return addmv_o(self, mat, vec, beta, alpha, out);
}
Tensor &addmv_i(Tensor &self, const Tensor &mat, const Tensor &vec, const Scalar &beta, const Scalar &alpha)
{
	return addmv_o(self, mat, vec, beta, alpha, self);
}

Tensor &mv_o(const Tensor &mat, const Tensor &vec, Tensor &out)
{
	NEURON_NATIVE("mv");
	TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got 1, ", mat.dim(), ", ",
		    vec.dim());
	TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", mat.size(0), "), mat (", mat.size(0), "x",
		    mat.size(1), "), vec (", vec.size(0), ")");
	if (!mm_dtypes_ok(mat, vec)) {
		note_fallback("mv");
		return assign_out(out, at::mv(mat.cpu(), vec.cpu()));
	}
	Tensor r = at::empty({mat.size(0), 1}, mat.options());
	matmul_cmd(r, mat, vec.view({-1, 1}), 1.0, 0.0);
	return assign_out(out, r.view({mat.size(0)}));
}
Tensor mv_f(const Tensor &mat, const Tensor &vec)
{
	Tensor out = at::empty({0}, mat.options());
	return mv_o(mat, vec, out);
}

// out = beta self + alpha vec1 vec2^T (a matmul with K = 1).
Tensor &addr_o(const Tensor &self, const Tensor &v1, const Tensor &v2, const Scalar &beta, const Scalar &alpha, Tensor &out)
{
	NEURON_NATIVE("addr");
	TORCH_CHECK(v1.dim() == 1 && v2.dim() == 1, "addr: Expected 1-D argument vec1, but got ", v1.dim(), "-D");
	const double be = beta.toDouble();
	if (!mm_dtypes_ok(v1, v2) || !chip_ok(self) || self.scalar_type() != v1.scalar_type()) {
		note_fallback("addr");
		return assign_out(out, at::addr(self.cpu(), v1.cpu(), v2.cpu(), beta, alpha));
	}
	Tensor r = at::empty({v1.size(0), v2.size(0)}, v1.options());
	if (be != 0)
		r.copy_(self.expand(r.sizes()));
	matmul_cmd(r, v1.view({-1, 1}), v2.view({1, -1}), alpha.toDouble(), be);
	return assign_out(out, r);
}
Tensor addr_f(const Tensor &self, const Tensor &v1, const Tensor &v2, const Scalar &beta, const Scalar &alpha)
{
	Tensor out = at::empty({0}, v1.options());
	return addr_o(self, v1, v2, beta, alpha, out);
}

Tensor trace_f(const Tensor &self)
{
	NEURON_NATIVE("trace");
	TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
	if (!chip_ok(self)) {
		note_fallback("trace");
		return at::trace(self.cpu()).to(self.device());
	}
	return self.diagonal().sum();
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("dot", &dot_f);
	m.impl("dot.out", &dot_o);
	m.impl("vdot", &vdot_f);
	m.impl("vdot.out", &vdot_o);
	m.impl("mv", &mv_f);
	m.impl("mv.out", &mv_o);
	m.impl("addmv", &addmv_f);
	m.impl("addmv_", &addmv_i);
	m.impl("addmv.out", &addmv_o);
	m.impl("addr", &addr_f);
	m.impl("addr.out", &addr_o);
	m.impl("trace", &trace_f);
}

} // namespace torch_neuron
