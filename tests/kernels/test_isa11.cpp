// ISA 1.1 ops (UNARY_MATH, BINARY_MATH, COMPARE(_SCALAR), WHERE, LOG_SOFTMAX,
// INDEX_SELECT, INDEX_ADD, GATHER, SCATTER_ADD) against double references, with
// strided and broadcast operands, several dtypes, and their semantic rejections
// (including out-of-range indices, which fault at execution).
#include "ref.h"

using namespace ref;

namespace {

double unary_ref(int fn, double x, double p0, double p1, int flags)
{
	switch (fn) {
	case NEURON_UNARY_LOG: return std::log(x);
	case NEURON_UNARY_SQRT: return std::sqrt(x);
	case NEURON_UNARY_RSQRT: return 1 / std::sqrt(x);
	case NEURON_UNARY_ABS: return std::fabs(x);
	case NEURON_UNARY_SIGMOID: return 1 / (1 + std::exp(-x));
	case NEURON_UNARY_ERF: return std::erf(x);
	case NEURON_UNARY_RECIPROCAL: return 1 / x;
	case NEURON_UNARY_POW: return std::pow(x, p0);
	case NEURON_UNARY_CLAMP:
		if (flags & 1)
			x = x < p0 ? p0 : x;
		if (flags & 2)
			x = x > p1 ? p1 : x;
		return x;
	default: return -x;
	}
}

const Tol kLoose{1e-5, 1e-6};

Tol tol(int dt) { return dt == NEURON_DTYPE_F32 ? kLoose : tol_for(dt); }

} // namespace

Test(isa11, unary_math_all_functions)
{
	for (int dt : kFloatDtypes)
		for (int fn = 0; fn < NEURON_UNARY_SIN; ++fn) // the ISA 1.1 functions (1.4's: test_isa14.cpp)
			for (bool strided : {false, true}) {
				const Tensor base = Tensor::make(dt, {6, 9});
				const Tensor in = strided ? base.transpose(0, 1) : base;
				const bool positive = fn == NEURON_UNARY_LOG || fn == NEURON_UNARY_SQRT || fn == NEURON_UNARY_RSQRT ||
						      fn == NEURON_UNARY_POW;
				in.randomize(7 + fn, positive ? 0.1 : -3, 3);
				const Tensor out = Tensor::make(dt, {in.sizes[0], in.sizes[1]});
				auto cmd = make_cmd(NEURON_OP_UNARY_MATH, {&out, &in});
				cmd.iscalars[0] = fn;
				double p0 = 0, p1 = 0;
				int flags = 0;
				if (fn == NEURON_UNARY_POW)
					cmd.fscalars.f[0] = p0 = 1.5;
				if (fn == NEURON_UNARY_CLAMP) {
					cmd.iscalars[1] = flags = 3;
					cmd.fscalars.f[0] = p0 = -1;
					cmd.fscalars.f[1] = p1 = 0.5;
				}
				run(cmd, {&out, &in});
				expect_tensor(out, [&](const int64_t *i) { return unary_ref(fn, in.get(i), p0, p1, flags); }, tol(dt),
					      "unary_math fn " + std::to_string(fn) + " " + dname(dt));
			}
}

Test(isa11, binary_math_broadcast)
{
	for (int fn = 0; fn < NEURON_BINARY_ATAN2; ++fn) { // the ISA 1.1 functions
		const int dt = NEURON_DTYPE_F32;
		const Tensor a = Tensor::make(dt, {4, 5});
		const Tensor b = Tensor::make(dt, {1, 5}).expand(0, 4); // stride-0 broadcast
		a.randomize(3, fn == NEURON_BINARY_POW ? 0.1 : -3, 3);
		b.randomize(4, -2, 2);
		const Tensor out = Tensor::make(dt, {4, 5});
		auto cmd = make_cmd(NEURON_OP_BINARY_MATH, {&out, &a, &b});
		cmd.iscalars[0] = fn;
		if (fn == NEURON_BINARY_THRESHOLD_BACKWARD)
			cmd.fscalars.f[0] = 0.25;
		run(cmd, {&out, &a, &b});
		expect_tensor(
			out,
			[&](const int64_t *i) {
				const double x = a.get(i), y = b.get(i);
				switch (fn) {
				case NEURON_BINARY_MAXIMUM: return std::max(x, y);
				case NEURON_BINARY_MINIMUM: return std::min(x, y);
				case NEURON_BINARY_POW: return std::pow(x, y);
				case NEURON_BINARY_GELU_BACKWARD:
					return x * (0.5 * (1 + std::erf(y / std::sqrt(2.0))) + y * std::exp(-0.5 * y * y) / std::sqrt(2 * M_PI));
				default: return y > 0.25 ? x : 0.0;
				}
			},
			Tol{2e-5, 2e-6}, "binary_math fn " + std::to_string(fn));
	}
	// maximum on integers is exact.
	const Tensor a = Tensor::make(NEURON_DTYPE_I64, {7}), b = Tensor::make(NEURON_DTYPE_I32, {7});
	a.randomize(1);
	b.randomize(2);
	const Tensor out = Tensor::make(NEURON_DTYPE_I64, {7});
	auto cmd = make_cmd(NEURON_OP_BINARY_MATH, {&out, &a, &b});
	run(cmd, {&out, &a, &b});
	expect_tensor(out, [&](const int64_t *i) { return std::max(a.get(i), b.get(i)); }, Tol{0, 0}, "maximum i64");
}

Test(isa11, compare_and_where)
{
	const int dts[] = {NEURON_DTYPE_F32, NEURON_DTYPE_I64, NEURON_DTYPE_BF16};
	for (int dt : dts)
		for (int fn = 0; fn < NEURON_CMP_COUNT_; ++fn) {
			const Tensor a = Tensor::make(dt, {3, 4}), b = Tensor::make(dt, {4, 3}).transpose(0, 1);
			a.randomize(5, -2, 2);
			b.randomize(6, -2, 2);
			// Make some elements equal.
			int64_t i0[2] = {1, 1};
			b.set(i0, a.get(i0));
			const Tensor out = Tensor::make(NEURON_DTYPE_BOOL, {3, 4});
			auto cmd = make_cmd(NEURON_OP_COMPARE, {&out, &a, &b});
			cmd.iscalars[0] = fn;
			run(cmd, {&out, &a, &b});
			auto cmp = [&](double x, double y) {
				switch (fn) {
				case NEURON_CMP_EQ: return x == y;
				case NEURON_CMP_NE: return x != y;
				case NEURON_CMP_LT: return x < y;
				case NEURON_CMP_LE: return x <= y;
				case NEURON_CMP_GT: return x > y;
				default: return x >= y;
				}
			};
			expect_tensor(out, [&](const int64_t *i) { return cmp(a.get(i), b.get(i)) ? 1.0 : 0.0; }, Tol{0, 0},
				      "compare " + std::to_string(fn));
			const Tensor outs = Tensor::make(NEURON_DTYPE_BOOL, {3, 4});
			auto cs = make_cmd(NEURON_OP_COMPARE_SCALAR, {&outs, &a});
			cs.iscalars[0] = fn;
			cs.fscalars.f[0] = 0.0;
			run(cs, {&outs, &a});
			expect_tensor(outs, [&](const int64_t *i) { return cmp(a.get(i), 0.0) ? 1.0 : 0.0; }, Tol{0, 0},
				      "compare_scalar " + std::to_string(fn));
			// where(out_bool, a, b)
			const Tensor w = Tensor::make(dt, {3, 4});
			auto cw = make_cmd(NEURON_OP_WHERE, {&w, &out, &a, &b});
			run(cw, {&w, &out, &a, &b});
			expect_tensor(w, [&](const int64_t *i) { return out.get(i) != 0 ? a.get(i) : b.get(i); }, Tol{0, 0},
				      "where");
		}
}

// WHERE on contiguous operands of every element size (the fixed-size fast path),
// across several blocks, and in place (out is a).
Test(isa11, where_every_element_size_contiguous_and_in_place)
{
	for (int dt : kAllDtypes) {
		const Tensor a = Tensor::make(dt, {3000}), b = Tensor::make(dt, {3000});
		a.randomize(11, -50, 50);
		b.randomize(12, -50, 50);
		const Tensor c = Tensor::make(NEURON_DTYPE_BOOL, {3000});
		for (int64_t i = 0; i < 3000; ++i)
			c.set(&i, (i * 7919) % 5 < 2 ? 1.0 : 0.0);
		const Tensor w = Tensor::make(dt, {3000});
		auto cw = make_cmd(NEURON_OP_WHERE, {&w, &c, &a, &b});
		run(cw, {&w, &c, &a, &b});
		expect_tensor(w, [&](const int64_t *i) { return c.get(i) != 0 ? a.get(i) : b.get(i); }, Tol{0, 0},
			      "where dtype " + std::to_string(dt));
		std::vector<double> want(3000);
		for (int64_t i = 0; i < 3000; ++i)
			want[i] = c.get(&i) != 0 ? a.get(&i) : b.get(&i);
		auto ci = make_cmd(NEURON_OP_WHERE, {&a, &c, &a, &b});
		run(ci, {&a, &c, &a, &b});
		expect_tensor(a, [&](const int64_t *i) { return want[*i]; }, Tol{0, 0},
			      "where in place, dtype " + std::to_string(dt));
	}
}

// WHERE with one side a value broadcast along the run (masked_fill's fill value:
// stride 0), either side, every element size.
Test(isa11, where_with_a_broadcast_value)
{
	for (int dt : kAllDtypes)
		for (int side = 2; side <= 3; ++side) {
			const Tensor x = Tensor::make(dt, {3000}), one = Tensor::make(dt, {1});
			x.randomize(13, -50, 50);
			one.randomize(14, -50, 50);
			const Tensor v = one.expand(0, 3000);
			const Tensor c = Tensor::make(NEURON_DTYPE_BOOL, {3000});
			for (int64_t i = 0; i < 3000; ++i)
				c.set(&i, (i * 7919) % 3 == 0 ? 1.0 : 0.0);
			const Tensor w = Tensor::make(dt, {3000});
			const Tensor &a = side == 2 ? v : x, &b = side == 2 ? x : v;
			auto cw = make_cmd(NEURON_OP_WHERE, {&w, &c, &a, &b});
			run(cw, {&w, &c, &a, &b});
			expect_tensor(w, [&](const int64_t *i) { return c.get(i) != 0 ? a.get(i) : b.get(i); }, Tol{0, 0},
				      "where, operand " + std::to_string(side) + " broadcast, dtype " + std::to_string(dt));
		}
}

Test(isa11, log_softmax)
{
	for (int dt : kFloatDtypes)
		for (int dim = 0; dim < 2; ++dim) {
			const Tensor in = Tensor::make(dt, {5, 7}).transpose(0, 1);
			in.randomize(9, -6, 6);
			const Tensor out = Tensor::make(dt, {7, 5});
			auto cmd = make_cmd(NEURON_OP_LOG_SOFTMAX, {&out, &in});
			cmd.iscalars[0] = dim;
			run(cmd, {&out, &in});
			expect_tensor(
				out,
				[&](const int64_t *oi) {
					int64_t idx[2] = {oi[0], oi[1]};
					double m = -INFINITY, s = 0;
					for (int64_t j = 0; j < in.sizes[dim]; ++j) {
						idx[dim] = j;
						m = std::max(m, in.get(idx));
					}
					for (int64_t j = 0; j < in.sizes[dim]; ++j) {
						idx[dim] = j;
						s += std::exp(in.get(idx) - m);
					}
					return in.get(oi) - m - std::log(s);
				},
				dt == NEURON_DTYPE_F32 ? Tol{1e-5, 1e-5} : tol_for(dt), "log_softmax");
		}
}

Test(isa11, index_select_and_add)
{
	const Tensor in = Tensor::make(NEURON_DTYPE_F32, {6, 4});
	in.randomize(11);
	const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {5});
	const int64_t vals[5] = {3, 0, 5, 3, 1};
	for (int64_t j = 0; j < 5; ++j)
		ix.set(&j, static_cast<double>(vals[j]));
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {5, 4});
	auto cmd = make_cmd(NEURON_OP_INDEX_SELECT, {&out, &in, &ix});
	run(cmd, {&out, &in, &ix});
	expect_tensor(out, [&](const int64_t *i) { int64_t p[2] = {vals[i[0]], i[1]}; return in.get(p); }, Tol{0, 0},
		      "index_select dim 0");
	// dim 1 with an i32 index on a transposed input
	const Tensor in2 = Tensor::make(NEURON_DTYPE_BF16, {4, 6}).transpose(0, 1);
	in2.randomize(12);
	const Tensor ix2 = Tensor::make(NEURON_DTYPE_I32, {3});
	const int64_t v2[3] = {2, 2, 0};
	for (int64_t j = 0; j < 3; ++j)
		ix2.set(&j, static_cast<double>(v2[j]));
	const Tensor out2 = Tensor::make(NEURON_DTYPE_BF16, {6, 3});
	auto c2 = make_cmd(NEURON_OP_INDEX_SELECT, {&out2, &in2, &ix2});
	c2.iscalars[0] = 1;
	run(c2, {&out2, &in2, &ix2});
	expect_tensor(out2, [&](const int64_t *i) { int64_t p[2] = {i[0], v2[i[1]]}; return in2.get(p); }, Tol{0, 0},
		      "index_select dim 1");
	// index_add with duplicate indices (embedding backward)
	const Tensor acc = Tensor::make(NEURON_DTYPE_F32, {6, 4});
	acc.randomize(13);
	const Tensor before = acc.clone();
	const Tensor src = Tensor::make(NEURON_DTYPE_F32, {5, 4});
	src.randomize(14);
	auto c3 = make_cmd(NEURON_OP_INDEX_ADD, {&acc, &ix, &src});
	run(c3, {&acc, &ix, &src});
	expect_tensor(
		acc,
		[&](const int64_t *i) {
			double v = before.get(i);
			for (int64_t j = 0; j < 5; ++j)
				if (vals[j] == i[0]) {
					int64_t p[2] = {j, i[1]};
					v += src.get(p);
				}
			return v;
		},
		Tol{1e-6, 1e-6}, "index_add");
}

Test(isa11, gather_and_scatter_add)
{
	const Tensor in = Tensor::make(NEURON_DTYPE_F32, {4, 10});
	in.randomize(21);
	const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {4, 1});
	const int64_t t[4] = {9, 0, 3, 3};
	for (int64_t r = 0; r < 4; ++r) {
		int64_t p[2] = {r, 0};
		ix.set(p, static_cast<double>(t[r]));
	}
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {4, 1});
	auto cmd = make_cmd(NEURON_OP_GATHER, {&out, &in, &ix});
	cmd.iscalars[0] = 1;
	run(cmd, {&out, &in, &ix});
	expect_tensor(out, [&](const int64_t *i) { int64_t p[2] = {i[0], t[i[0]]}; return in.get(p); }, Tol{0, 0}, "gather");
	const Tensor acc = Tensor::make(NEURON_DTYPE_F32, {4, 10});
	acc.randomize(22);
	const Tensor before = acc.clone();
	const Tensor src = Tensor::make(NEURON_DTYPE_F32, {4, 1});
	src.randomize(23);
	auto c2 = make_cmd(NEURON_OP_SCATTER_ADD, {&acc, &ix, &src});
	c2.iscalars[0] = 1;
	run(c2, {&acc, &ix, &src});
	expect_tensor(
		acc,
		[&](const int64_t *i) {
			int64_t p[2] = {i[0], 0};
			return before.get(i) + (t[i[0]] == i[1] ? src.get(p) : 0.0);
		},
		Tol{1e-6, 1e-6}, "scatter_add");
}

Test(isa11, out_of_range_index_faults)
{
	const Tensor in = Tensor::make(NEURON_DTYPE_F32, {3, 2});
	const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {2});
	int64_t j = 1;
	ix.set(&j, 3); // one past the end
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {2, 2});
	auto cmd = make_cmd(NEURON_OP_INDEX_SELECT, {&out, &in, &ix});
	cr_assert(!neuron::kernels::check_semantics(cmd));
	std::vector<View> views{out.view(), in.view(), ix.view()};
	const auto f = neuron::kernels::execute(cmd, views, 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC);
	cr_assert(f->message.find("out of range") != std::string::npos, "%s", f->message.c_str());
	j = 0;
	ix.set(&j, -1);
	const auto g = neuron::kernels::execute(cmd, views, 1);
	cr_assert(g && g->code == NEURON_FAULT_EXEC);
}

Test(isa11, semantic_rejections)
{
	const Tensor f = Tensor::make(NEURON_DTYPE_F32, {4}), i = Tensor::make(NEURON_DTYPE_I32, {4}),
		     b = Tensor::make(NEURON_DTYPE_BOOL, {4}), f5 = Tensor::make(NEURON_DTYPE_F32, {5});
	auto u = make_cmd(NEURON_OP_UNARY_MATH, {&f, &f});
	u.iscalars[0] = NEURON_UNARY_COUNT_;
	cr_assert(neuron::kernels::check_semantics(u), "bad unary selector accepted");
	u.iscalars[0] = NEURON_UNARY_LOG;
	u.fscalars.f[0] = 2;
	cr_assert(neuron::kernels::check_semantics(u), "unused scalar accepted");
	auto ui = make_cmd(NEURON_OP_UNARY_MATH, {&i, &i});
	cr_assert(neuron::kernels::check_semantics(ui), "integer unary math accepted");
	auto c = make_cmd(NEURON_OP_COMPARE, {&f, &f, &f});
	cr_assert(neuron::kernels::check_semantics(c), "non-bool compare output accepted");
	auto w = make_cmd(NEURON_OP_WHERE, {&f, &b, &f, &i});
	cr_assert(neuron::kernels::check_semantics(w), "where with mixed dtypes accepted");
	auto w2 = make_cmd(NEURON_OP_WHERE, {&f, &f, &f, &f});
	cr_assert(neuron::kernels::check_semantics(w2), "where with a float condition accepted");
	auto bm = make_cmd(NEURON_OP_BINARY_MATH, {&f, &f, &f5});
	cr_assert(neuron::kernels::check_semantics(bm), "shape mismatch accepted");
	auto is = make_cmd(NEURON_OP_INDEX_SELECT, {&f, &f5, &f});
	cr_assert(neuron::kernels::check_semantics(is), "float index accepted");
	auto is2 = make_cmd(NEURON_OP_INDEX_SELECT, {&f, &f5, &i});
	is2.iscalars[0] = 1;
	cr_assert(neuron::kernels::check_semantics(is2), "dim past ndim accepted");
	auto ia = make_cmd(NEURON_OP_INDEX_ADD, {&b, &i, &b});
	cr_assert(neuron::kernels::check_semantics(ia), "bool index_add accepted");
}
