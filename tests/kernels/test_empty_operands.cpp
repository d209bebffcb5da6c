// Operands with no elements beside outputs that have some: a reduction over a dim
// of size 0, a matmul with K = 0. Validation leaves an empty tensor's strides
// unconstrained (nothing is ever read through them: check_semantics), so the
// kernels must produce the output without scaling them; here they are as large as
// the descriptor allows. Results are checked against the ops' definitions (an empty
// sum is 0, an empty mean NaN, a product over K = 0 is beta * out); built with
// UndefinedBehaviorSanitizer, an overflow in the address arithmetic fails the run
// (`UBSAN_OPTIONS=halt_on_error=1 build-asan/tests/kernels/kernels-ops --filter
// 'empty_operands/*'`: clean).
#include "ref.h"

#include <climits>

using namespace ref;

namespace {

// The input with every stride as large as the descriptor allows.
Tensor empty_with_wild_strides(int dt, const std::vector<int64_t> &shape)
{
	Tensor t = Tensor::make(dt, shape);
	for (int d = 0; d < t.ndim; ++d)
		t.strides[d] = INT64_MAX - d;
	return t;
}

void expect_all(const Tensor &out, double value, const std::string &what)
{
	expect_tensor(out, [&](const int64_t *) { return value; }, Tol{0, 0}, what);
}

} // namespace

Test(empty_operands, reductions_over_an_empty_dim)
{
	for (uint16_t opc : {NEURON_OP_SUM, NEURON_OP_MEAN}) {
		const double expected = opc == NEURON_OP_SUM ? 0.0 : NAN;
		const Tensor in = empty_with_wild_strides(NEURON_DTYPE_F32, {0, 5, 3});
		const Tensor out = Tensor::make(NEURON_DTYPE_F32, {1, 5, 3}); // keepdim
		auto cmd = make_cmd(opc, {&out, &in});
		cmd.iscalars[0] = 1; // dim 0
		run(cmd, {&out, &in});
		expect_all(out, expected, std::string(neuron::kernels::op_name(opc)) + " over dim 0 of [0,5,3]");

		const Tensor in2 = empty_with_wild_strides(NEURON_DTYPE_F32, {4, 0});
		const Tensor out2 = Tensor::make(NEURON_DTYPE_F32, {4, 1});
		auto cmd2 = make_cmd(opc, {&out2, &in2});
		cmd2.iscalars[0] = 2; // dim 1
		run(cmd2, {&out2, &in2});
		expect_all(out2, expected, std::string(neuron::kernels::op_name(opc)) + " over dim 1 of [4,0]");
	}
}

Test(empty_operands, matmul_with_k_zero)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16}) {
		const Tensor a = empty_with_wild_strides(dt, {6, 0}), b = empty_with_wild_strides(dt, {0, 5});
		const Tensor out = Tensor::make(dt, {6, 5});
		out.randomize(3, -2, 2);
		const Tensor old = out.clone();
		auto cmd = make_cmd(NEURON_OP_MATMUL, {&out, &a, &b});
		cmd.fscalars.f[0] = 1.0; // alpha
		cmd.fscalars.f[1] = 0.5; // beta
		run(cmd, {&out, &a, &b});
		expect_tensor(out, [&](const int64_t *i) { return quantize(dt, 0.5 * old.get(i)); }, tol_for(dt),
			      std::string("matmul K=0 ") + dname(dt));

		const Tensor ba = empty_with_wild_strides(dt, {3, 4, 0}), bb = empty_with_wild_strides(dt, {3, 0, 2});
		const Tensor bout = Tensor::make(dt, {3, 4, 2});
		auto bcmd = make_cmd(NEURON_OP_MATMUL, {&bout, &ba, &bb});
		bcmd.fscalars.f[0] = 1.0;
		bcmd.fscalars.f[1] = 0.0;
		run(bcmd, {&bout, &ba, &bb});
		expect_all(bout, 0.0, std::string("batched matmul K=0 ") + dname(dt));
	}
}
