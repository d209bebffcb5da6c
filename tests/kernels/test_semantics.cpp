// check_semantics: starting from valid commands, each bad field on its own must
// give the right fault code and a message naming it. Also execute()'s own checks.
#include "ref.h"

using namespace ref;
using neuron::kernels::check_semantics;

namespace {

neuron_tensor_desc desc(int dt, std::vector<int64_t> shape, uint64_t addr = 0x1000)
{
	neuron_tensor_desc d{};
	d.addr = addr;
	d.dtype = static_cast<uint8_t>(dt);
	d.ndim = static_cast<uint8_t>(shape.size());
	int64_t st = 1;
	for (int i = d.ndim - 1; i >= 0; --i) {
		d.sizes[i] = shape[static_cast<size_t>(i)];
		d.strides[i] = st;
		st *= std::max<int64_t>(1, d.sizes[i]);
	}
	return d;
}

neuron_cmd cmd_of(uint16_t op, std::vector<neuron_tensor_desc> ds)
{
	neuron_cmd c{};
	c.opcode = op;
	c.num_operands = static_cast<uint8_t>(ds.size());
	for (size_t k = 0; k < ds.size(); ++k)
		c.operands[k] = ds[k];
	return c;
}

neuron_cmd add_cmd(int dt = NEURON_DTYPE_F32)
{
	auto c = cmd_of(NEURON_OP_ADD, {desc(dt, {4, 4}), desc(dt, {4, 4}), desc(dt, {4, 4})});
	c.fscalars.f[0] = 1;
	return c;
}

neuron_cmd mm_cmd(int dt = NEURON_DTYPE_F32)
{
	auto c = cmd_of(NEURON_OP_MATMUL, {desc(dt, {3, 5}), desc(dt, {3, 4}), desc(dt, {4, 5})});
	c.fscalars.f[0] = 1;
	return c;
}

neuron_cmd red_cmd(uint16_t op, int odt, int idt, int64_t mask)
{
	auto c = cmd_of(op, {desc(odt, {2, 1, 4}), desc(idt, {2, 3, 4})});
	c.iscalars[0] = mask;
	return c;
}

void ok(const neuron_cmd &c, const char *what)
{
	const auto f = check_semantics(c);
	cr_assert(!f, "%s: unexpectedly rejected: %s", what, f ? f->message.c_str() : "");
}

void bad(const neuron_cmd &c, uint32_t code, const char *needle, const char *what)
{
	const auto f = check_semantics(c);
	cr_assert(f, "%s: accepted, expected fault %u", what, code);
	cr_assert_eq(f->code, code, "%s: fault code %u, expected %u (%s)", what, f->code, code, f->message.c_str());
	cr_assert(f->message.find(needle) != std::string::npos, "%s: message \"%s\" lacks \"%s\"", what,
		  f->message.c_str(), needle);
}

constexpr uint32_t OPND = NEURON_FAULT_BAD_OPERAND;

} // namespace

Test(semantics, valid_commands_pass)
{
	ok(add_cmd(), "add");
	ok(mm_cmd(), "matmul");
	ok(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 2), "sum");
	ok(cmd_of(NEURON_OP_NOP, {}), "nop");
	auto fill = cmd_of(NEURON_OP_FILL, {desc(NEURON_DTYPE_I32, {3})});
	fill.iscalars[0] = -7;
	ok(fill, "fill");
	for (int d : kAllDtypes)
		for (int s : kAllDtypes)
			ok(cmd_of(NEURON_OP_COPY, {desc(d, {2, 3}), desc(s, {2, 3})}), "copy pair");
	auto bm = cmd_of(NEURON_OP_MATMUL, {desc(NEURON_DTYPE_BF16, {2, 3, 5}), desc(NEURON_DTYPE_BF16, {2, 3, 4}),
					    desc(NEURON_DTYPE_BF16, {2, 4, 5})});
	bm.operands[1].strides[0] = 0; // broadcast batch
	ok(bm, "batched matmul");
	auto sm = cmd_of(NEURON_OP_SOFTMAX, {desc(NEURON_DTYPE_F32, {3, 4}), desc(NEURON_DTYPE_BF16, {3, 4})});
	sm.iscalars[0] = 1;
	ok(sm, "softmax");
	auto empty = add_cmd();
	for (int k = 0; k < 3; ++k) {
		empty.operands[k].sizes[0] = 0;
		empty.operands[k].strides[1] = INT64_MAX; // strides of an empty tensor are never used
	}
	ok(empty, "empty add");
}

Test(semantics, bad_opcode)
{
	for (uint16_t op : {uint16_t{0}, uint16_t{NEURON_OP_SVD + 1}, uint16_t{63}, uint16_t{NEURON_OP_COUNT_}, uint16_t{100}, uint16_t{65535}}) {
		auto c = add_cmd();
		c.opcode = op;
		bad(c, NEURON_FAULT_BAD_OPCODE, "opcode", "bad opcode");
	}
}

Test(semantics, header_fields)
{
	auto c = add_cmd();
	c.num_operands = 2;
	bad(c, OPND, "num_operands=2 but add takes 3", "arity");
	c = cmd_of(NEURON_OP_NOP, {});
	c.num_operands = 1;
	bad(c, OPND, "num_operands", "nop arity");
	c = add_cmd();
	c.flags = 1;
	bad(c, OPND, "flags", "flags");
	c = add_cmd();
	c.reserved0 = 4;
	bad(c, OPND, "reserved0", "reserved0");
	c = add_cmd();
	c.operands[3].addr = 8;
	bad(c, OPND, "operand 3: unused", "unused operand slot");
}

Test(semantics, descriptor_fields)
{
	auto c = add_cmd();
	c.operands[1].reserved = 1;
	bad(c, OPND, "operand 1 (a): reserved", "desc reserved");
	for (uint8_t dt : {0, 8, 255}) {
		c = add_cmd();
		c.operands[2].dtype = dt;
		bad(c, OPND, "operand 2 (b): dtype", "bad dtype");
	}
	c = add_cmd();
	c.operands[0].ndim = 9;
	bad(c, OPND, "operand 0 (out): ndim=9", "ndim 9");
	c = add_cmd();
	c.operands[1].sizes[1] = -1;
	bad(c, OPND, "operand 1 (a): sizes[1]=-1 is negative", "negative size");
	c = add_cmd();
	c.operands[2].strides[0] = -4;
	bad(c, OPND, "operand 2 (b): strides[0]=-4 is negative", "negative stride");
	c = add_cmd();
	c.operands[0].sizes[5] = 3;
	bad(c, OPND, "past ndim", "size past ndim");
	c = add_cmd();
	c.operands[0].strides[2] = 1;
	bad(c, OPND, "past ndim", "stride past ndim");
	c = add_cmd();
	c.operands[1].mem_space = 2;
	bad(c, OPND, "mem_space", "mem space");
	c = add_cmd();
	c.operands[1].host_buffer = 3;
	bad(c, OPND, "host_buffer", "host buffer on device");
	c = add_cmd();
	c.operands[2].addr = 0x1002;
	bad(c, OPND, "not aligned", "misaligned");
	c = add_cmd();
	for (int k = 0; k < 3; ++k) {
		c.operands[k].sizes[0] = c.operands[k].sizes[1] = int64_t{1} << 32;
		c.operands[k].strides[0] = c.operands[k].strides[1] = 0;
	}
	bad(c, OPND, "element count overflows", "numel overflow");
	c = add_cmd();
	for (int k = 0; k < 3; ++k) {
		c.operands[k].sizes[0] = int64_t{1} << 20;
		c.operands[k].strides[0] = int64_t{1} << 42;
	}
	bad(c, OPND, "2^62", "extent overflow");
	// A dim of size 1 adds nothing to the extent, so only this bound keeps its
	// stride in bytes within int64 (the fuzzer's sort with a size-1 dim).
	c = add_cmd();
	for (int k = 0; k < 3; ++k) {
		c.operands[k].sizes[0] = 1;
		c.operands[k].strides[0] = (int64_t{1} << 56) + 1;
	}
	bad(c, OPND, "exceeds 2^56", "stride of a size-1 dim");
	c = add_cmd();
	c.operands[0].addr = UINT64_MAX - 3;
	bad(c, OPND, "overflows 64 bits", "addr + extent");
}

Test(semantics, shapes)
{
	auto c = add_cmd();
	c.operands[2].sizes[1] = 5;
	c.operands[2].strides[0] = 5;
	bad(c, OPND, "operand 2 (b): sizes[1]=5 does not match out sizes[1]=4", "shape mismatch");
	c = add_cmd();
	c.operands[1].ndim = 1;
	c.operands[1].sizes[1] = c.operands[1].strides[1] = 0;
	bad(c, OPND, "operand 1 (a): ndim=1 does not match out ndim=2", "ndim mismatch");
	c = cmd_of(NEURON_OP_COPY, {desc(NEURON_DTYPE_F32, {2, 3}), desc(NEURON_DTYPE_F32, {3, 2})});
	bad(c, OPND, "operand 1 (in): sizes[0]=3", "copy shape");
}

Test(semantics, scalars)
{
	auto c = add_cmd();
	c.iscalars[0] = 1;
	bad(c, OPND, "i[0]", "add unused i[0]");
	c = add_cmd();
	c.fscalars.f[1] = -0.0;
	bad(c, OPND, "f[1]", "-0.0 is not zero");
	c = cmd_of(NEURON_OP_MUL, {desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2})});
	c.fscalars.f[0] = 1;
	bad(c, OPND, "f[0]", "mul takes no alpha");
	c = add_cmd(NEURON_DTYPE_I32);
	c.fscalars.f[0] = 2.5;
	bad(c, OPND, "alpha", "integer add with fractional alpha");
	c.fscalars.f[0] = -2;
	ok(c, "integer add with integral alpha");

	c = cmd_of(NEURON_OP_SUB_SCALAR, {desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2})});
	c.fscalars.f[0] = 3;
	c.iscalars[0] = 1;
	ok(c, "reversed sub_scalar");
	c.iscalars[0] = 2;
	bad(c, OPND, "i[0]=2 (reverse)", "reverse flag 2");
	c.iscalars[0] = 0;
	c.iscalars[1] = 3;
	bad(c, OPND, "i[1]", "float output ignores i[1]");
	c = cmd_of(NEURON_OP_MUL_SCALAR, {desc(NEURON_DTYPE_I64, {2}), desc(NEURON_DTYPE_I64, {2})});
	c.iscalars[1] = 3;
	ok(c, "integer mul_scalar");
	c.fscalars.f[0] = 3;
	bad(c, OPND, "f[0]", "integer output ignores f[0]");

	c = cmd_of(NEURON_OP_GELU, {desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2})});
	c.iscalars[0] = 1;
	ok(c, "gelu tanh");
	c.iscalars[0] = 2;
	bad(c, OPND, "i[0]=2", "gelu form 2");
	c = cmd_of(NEURON_OP_EXP, {desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2})});
	c.iscalars[0] = 1;
	bad(c, OPND, "i[0]", "exp takes no scalars");

	c = cmd_of(NEURON_OP_FILL, {desc(NEURON_DTYPE_U8, {3})});
	c.fscalars.f[0] = 1;
	bad(c, OPND, "f[0]", "integer fill takes i[0]");
	c = cmd_of(NEURON_OP_FILL, {desc(NEURON_DTYPE_BF16, {3})});
	c.iscalars[0] = 1;
	bad(c, OPND, "i[0]", "float fill takes f[0]");
	c = cmd_of(NEURON_OP_NOP, {});
	c.fscalars.f[3] = 1;
	bad(c, OPND, "f[3]", "nop scalars");
	c = cmd_of(NEURON_OP_COPY, {desc(NEURON_DTYPE_F32, {2}), desc(NEURON_DTYPE_F32, {2})});
	c.iscalars[3] = 1;
	bad(c, OPND, "i[3]", "copy scalars");
}

Test(semantics, dtypes_allowed)
{
	auto unary = [](uint16_t op, int odt, int idt) {
		return cmd_of(op, {desc(odt, {2}), desc(idt, {2})});
	};
	auto div = cmd_of(NEURON_OP_DIV, {desc(NEURON_DTYPE_I32, {2}), desc(NEURON_DTYPE_I32, {2}), desc(NEURON_DTYPE_I32, {2})});
	bad(div, OPND, "operand 0 (out): dtype i32", "integer div");
	auto sub = cmd_of(NEURON_OP_SUB, {desc(NEURON_DTYPE_BOOL, {2}), desc(NEURON_DTYPE_BOOL, {2}), desc(NEURON_DTYPE_BOOL, {2})});
	bad(sub, OPND, "dtype bool", "bool sub");
	bad(unary(NEURON_OP_EXP, NEURON_DTYPE_I64, NEURON_DTYPE_I64), OPND, "dtype i64", "integer exp");
	bad(unary(NEURON_OP_RELU, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL), OPND, "dtype bool", "bool relu");
	ok(unary(NEURON_OP_RELU, NEURON_DTYPE_I32, NEURON_DTYPE_I32), "integer relu");
	ok(unary(NEURON_OP_EXP, NEURON_DTYPE_F32, NEURON_DTYPE_I64), "exp of integers into f32");
	auto ds = cmd_of(NEURON_OP_DIV_SCALAR, {desc(NEURON_DTYPE_U8, {2}), desc(NEURON_DTYPE_U8, {2})});
	bad(ds, OPND, "dtype u8", "integer div_scalar");
	bad(red_cmd(NEURON_OP_MEAN, NEURON_DTYPE_I64, NEURON_DTYPE_I64, 2), OPND, "dtype i64", "integer mean");
	bad(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL, 2), OPND, "dtype bool", "bool sum");
	ok(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_I64, NEURON_DTYPE_BOOL, 2), "sum of bools");
	bad(red_cmd(NEURON_OP_AMAX, NEURON_DTYPE_F32, NEURON_DTYPE_BF16, 2), OPND, "amax keeps the dtype", "amax dtypes");
	auto sm = unary(NEURON_OP_SOFTMAX, NEURON_DTYPE_F32, NEURON_DTYPE_I32);
	bad(sm, OPND, "operand 1 (in): dtype i32", "integer softmax input");
}

Test(semantics, reductions)
{
	bad(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 8), OPND, "dim mask", "mask names dim 3 of 3-d");
	bad(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, -1), OPND, "dim mask", "negative mask");
	bad(red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 1), OPND, "operand 0 (out): sizes[0]=2 should be 1",
	    "out not keepdim for mask");
	auto c = red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 2);
	c.operands[0] = desc(NEURON_DTYPE_F32, {2, 4});
	bad(c, OPND, "keepdim", "out ndim");
	c = red_cmd(NEURON_OP_AMAX, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 2);
	c.operands[1].sizes[1] = 0;
	bad(c, OPND, "empty", "amax over empty dim");
	c.opcode = NEURON_OP_SUM;
	ok(c, "sum over empty dim");
	// ISA 1.3: i[1] is the accumulate flag, i[2] MEAN's divisor.
	c = red_cmd(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, 2);
	c.iscalars[1] = NEURON_REDUCE_ACCUMULATE;
	ok(c, "sum, accumulate");
	c.iscalars[1] = 2;
	bad(c, OPND, "i[1]=2 (flags)", "unknown reduction flag");
	c.iscalars[1] = 0;
	c.iscalars[2] = 5;
	bad(c, OPND, "i[2]=5 must be zero", "divisor on a sum");
	c.opcode = NEURON_OP_MEAN;
	ok(c, "mean with a divisor");
	c.iscalars[2] = -5;
	bad(c, OPND, "i[2]=-5 (mean divisor)", "negative divisor");
	c.iscalars[2] = 0;
	c.iscalars[3] = 1;
	bad(c, OPND, "i[3]", "reduction unused scalar");
}

Test(semantics, softmax)
{
	auto c = cmd_of(NEURON_OP_SOFTMAX, {desc(NEURON_DTYPE_F32, {3, 4}), desc(NEURON_DTYPE_F32, {3, 4})});
	c.iscalars[0] = 2;
	bad(c, OPND, "i[0]=2 (dim)", "softmax dim 2 of 2-d");
	c.iscalars[0] = -1;
	bad(c, OPND, "(dim)", "negative softmax dim");
	c.iscalars[0] = 1;
	ok(c, "softmax dim 1");
	c.operands[1].sizes[1] = 5;
	c.operands[1].strides[0] = 5;
	bad(c, OPND, "operand 1 (in): sizes[1]=5", "softmax shape");
	auto s0 = cmd_of(NEURON_OP_SOFTMAX, {desc(NEURON_DTYPE_F32, {}), desc(NEURON_DTYPE_F32, {})});
	ok(s0, "0-d softmax dim 0");
}

Test(semantics, matmul)
{
	auto c = mm_cmd();
	c.operands[2].sizes[0] = 6;
	bad(c, OPND, "operand 2 (b): sizes[0]=6 (K) does not match a sizes[1]=4", "K mismatch");
	c = mm_cmd();
	c.operands[1].sizes[0] = 2;
	bad(c, OPND, "(M)", "M mismatch");
	c = mm_cmd();
	c.operands[2].sizes[1] = 6;
	c.operands[2].strides[0] = 6;
	bad(c, OPND, "(N)", "N mismatch");
	for (int dt : {NEURON_DTYPE_I32, NEURON_DTYPE_I64, NEURON_DTYPE_U8, NEURON_DTYPE_BOOL})
		bad(mm_cmd(dt), OPND, "operand 0 (out): dtype", "integer matmul");
	c = mm_cmd();
	c.operands[2].dtype = NEURON_DTYPE_BF16;
	bad(c, OPND, "operand 2 (b): dtype bf16 does not match", "mixed dtypes");
	c = cmd_of(NEURON_OP_MATMUL, {desc(NEURON_DTYPE_F32, {1, 2, 3, 5}), desc(NEURON_DTYPE_F32, {1, 2, 3, 4}),
				      desc(NEURON_DTYPE_F32, {1, 2, 4, 5})});
	bad(c, OPND, "ndim=4", "4-d matmul");
	c = cmd_of(NEURON_OP_MATMUL, {desc(NEURON_DTYPE_F32, {2, 3, 5}), desc(NEURON_DTYPE_F32, {1, 3, 4}),
				      desc(NEURON_DTYPE_F32, {2, 4, 5})});
	bad(c, OPND, "(batch)", "batch mismatch");
	c = mm_cmd();
	c.fscalars.f[2] = 1;
	bad(c, OPND, "f[2]", "matmul f[2]");
	c = mm_cmd();
	c.fscalars.f[1] = 0.5;
	ok(c, "matmul beta");
}

Test(semantics, execute_checks_views)
{
	Tensor out = Tensor::make(NEURON_DTYPE_F32, {4}), a = Tensor::make(NEURON_DTYPE_F32, {4}), b = Tensor::make(NEURON_DTYPE_F32, {4});
	auto c = make_cmd(NEURON_OP_ADD, {&out, &a, &b});
	c.fscalars.f[0] = 1;
	std::vector<View> v = {out.view(), a.view(), b.view()};
	cr_assert(!neuron::kernels::execute(c, v, 1));
	auto f = neuron::kernels::execute(c, std::span<const View>(v.data(), 2), 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC, "wrong view count");
	v[2].sizes[0] = 5;
	f = neuron::kernels::execute(c, v, 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC, "view does not match descriptor");
	v[2] = b.view();
	v[1].data += 1;
	f = neuron::kernels::execute(c, v, 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC, "misaligned pointer");
	v[1].data = nullptr;
	f = neuron::kernels::execute(c, v, 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC, "null pointer");
}

Test(semantics, tables)
{
	cr_assert_eq(neuron::kernels::dtype_size(NEURON_DTYPE_F32), 4u);
	cr_assert_eq(neuron::kernels::dtype_size(NEURON_DTYPE_BF16), 2u);
	cr_assert_eq(neuron::kernels::dtype_size(NEURON_DTYPE_I64), 8u);
	cr_assert_eq(neuron::kernels::dtype_size(NEURON_DTYPE_BOOL), 1u);
	cr_assert_eq(neuron::kernels::dtype_size(0), 0u);
	cr_assert_eq(neuron::kernels::dtype_size(99), 0u);
	cr_assert_eq(neuron::kernels::op_arity(NEURON_OP_MATMUL), 3);
	cr_assert_eq(neuron::kernels::op_arity(NEURON_OP_NOP), 0);
	cr_assert_eq(neuron::kernels::op_arity(500), -1);
	cr_assert_str_eq(neuron::kernels::op_name(NEURON_OP_SOFTMAX), "softmax");
}
