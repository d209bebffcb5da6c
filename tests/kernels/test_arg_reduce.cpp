// ISA 1.2 ARG_REDUCE (argmax / argmin along one dim) against a reference that scans
// in double: every dim of 1-3-d tensors, transposed and sliced inputs, float and
// integer dtypes, ties (first index wins), NaN (first NaN wins), 0-d input; and
// the rejections (output dtype and shape, bool input, empty dim, selector).
#include "ref.h"

using namespace ref;

namespace {

int64_t ref_arg(const Tensor &in, const int64_t *out_idx, int dim, bool want_min)
{
	int64_t idx[NEURON_MAX_DIMS];
	std::copy(out_idx, out_idx + std::max(in.ndim, 1), idx);
	const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
	int64_t best = 0;
	double best_v = 0;
	for (int64_t i = 0; i < len; ++i) {
		if (in.ndim > 0)
			idx[dim] = i;
		const double v = in.get(idx);
		if (std::isnan(v))
			return i;
		if (i == 0 || (want_min ? v < best_v : v > best_v)) {
			best = i;
			best_v = v;
		}
	}
	return best;
}

void arg_case(const Tensor &in, int dim, bool want_min, const std::string &what)
{
	std::vector<int64_t> oshape = in.shape();
	if (in.ndim > 0)
		oshape[static_cast<size_t>(dim)] = 1;
	const Tensor out = Tensor::make(NEURON_DTYPE_I64, oshape);
	auto cmd = make_cmd(NEURON_OP_ARG_REDUCE, {&out, &in});
	cmd.iscalars[0] = dim;
	cmd.iscalars[1] = want_min ? 1 : 0;
	run(cmd, {&out, &in});
	expect_tensor(out, [&](const int64_t *i) { return static_cast<double>(ref_arg(in, i, dim, want_min)); }, {0, 0},
		      what + (want_min ? " argmin" : " argmax") + " dim " + std::to_string(dim) + " " + shape_str(in));
}

} // namespace

Test(arg_reduce, every_dim_layout_and_dtype)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_F16, NEURON_DTYPE_I32, NEURON_DTYPE_I64,
		       NEURON_DTYPE_U8})
		for (bool want_min : {false, true}) {
			const Tensor a = Tensor::make(dt, {5, 7, 3});
			a.randomize(11, dt == NEURON_DTYPE_U8 ? 0 : -50, 50);
			for (int d = 0; d < 3; ++d) {
				arg_case(a, d, want_min, "contiguous");
				arg_case(a.transpose(0, 2), d, want_min, "transposed");
				arg_case(a.slice(1, 1, 7, 2), d, want_min, "sliced");
			}
			const Tensor v = Tensor::make(dt, {1000}); // > one block per row
			v.randomize(12, dt == NEURON_DTYPE_U8 ? 0 : -100, 100);
			arg_case(v, 0, want_min, "long row");
		}
}

Test(arg_reduce, ties_nan_and_0d)
{
	const Tensor t = Tensor::make(NEURON_DTYPE_F32, {2, 6});
	const double vals[2][6] = {{1, 3, 3, 0, 0, 3}, {2, NAN, 5, NAN, -1, -1}};
	for (int64_t r = 0; r < 2; ++r)
		for (int64_t c = 0; c < 6; ++c) {
			const int64_t i[2] = {r, c};
			t.set(i, vals[r][c]);
		}
	for (bool want_min : {false, true})
		arg_case(t, 1, want_min, "ties/nan");
	const Tensor s = Tensor::make(NEURON_DTYPE_F32, {});
	s.randomize(3);
	arg_case(s, 0, false, "0-d");
}

Test(arg_reduce, large_parallel)
{
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {1100, 1000});
	a.randomize(21);
	arg_case(a, 1, false, "large");
	arg_case(a, 0, true, "large");
}

Test(arg_reduce, rejections)
{
	const Tensor in = Tensor::make(NEURON_DTYPE_F32, {4, 5});
	const Tensor out = Tensor::make(NEURON_DTYPE_I64, {4, 1});
	auto ok = make_cmd(NEURON_OP_ARG_REDUCE, {&out, &in});
	ok.iscalars[0] = 1;
	cr_assert(!neuron::kernels::check_semantics(ok));
	auto rejected = [](const neuron_cmd &c, const char *needle) {
		const auto f = neuron::kernels::check_semantics(c);
		cr_assert(f && f->code == NEURON_FAULT_BAD_OPERAND, "accepted: expected '%s'", needle);
		cr_assert(f->message.find(needle) != std::string::npos, "'%s' lacks '%s'", f->message.c_str(), needle);
	};
	const Tensor f32_out = Tensor::make(NEURON_DTYPE_F32, {4, 1});
	auto c = make_cmd(NEURON_OP_ARG_REDUCE, {&f32_out, &in});
	c.iscalars[0] = 1;
	rejected(c, "operand 0 (out)");
	const Tensor wide = Tensor::make(NEURON_DTYPE_I64, {4, 2});
	c = make_cmd(NEURON_OP_ARG_REDUCE, {&wide, &in});
	c.iscalars[0] = 1;
	rejected(c, "sizes[1]");
	const Tensor bools = Tensor::make(NEURON_DTYPE_BOOL, {4, 5});
	c = make_cmd(NEURON_OP_ARG_REDUCE, {&out, &bools});
	c.iscalars[0] = 1;
	rejected(c, "operand 1 (in)");
	const Tensor empty = Tensor::make(NEURON_DTYPE_F32, {4, 0});
	c = make_cmd(NEURON_OP_ARG_REDUCE, {&out, &empty});
	c.iscalars[0] = 1;
	rejected(c, "empty");
	auto sel = ok;
	sel.iscalars[1] = 2;
	rejected(sel, "argmin");
	auto dim = ok;
	dim.iscalars[0] = 2;
	rejected(dim, "dim");
	auto unused = ok;
	unused.fscalars.f[0] = 1;
	rejected(unused, "f[0]");
}
