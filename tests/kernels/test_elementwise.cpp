// Binary, scalar and unary elementwise ops against double references: every
// allowed output dtype, mixed input dtypes, shapes from 0-d to >64k elements,
// transposed / sliced / broadcast (stride 0) operands and exact in-place use.
#include "ref.h"

using namespace ref;

namespace {

using Shape = std::vector<int64_t>;

const Shape kShapes[] = {{}, {0}, {1}, {7}, {3, 5}, {2, 3, 4}, {0, 3}, {300, 257}};

enum class L { Contig, Transposed, Sliced, BcastOuter, BcastInner };

const char *lname(L l)
{
	static const char *n[] = {"contig", "transposed", "sliced", "bcast-outer", "bcast-inner"};
	return n[static_cast<int>(l)];
}

// A tensor of logical shape s with layout l (falls back to contiguous where the
// layout needs more dims).
Tensor make_layout(int dt, const Shape &s, L l)
{
	const size_t n = s.size();
	switch (l) {
	case L::Transposed:
		if (n >= 2) {
			Shape t = s;
			std::swap(t[n - 1], t[n - 2]);
			return Tensor::make(dt, t).transpose(static_cast<int>(n) - 1, static_cast<int>(n) - 2);
		}
		break;
	case L::Sliced:
		if (n >= 1) {
			Shape t = s;
			t[n - 1] = 2 * s[n - 1] + 1;
			return Tensor::make(dt, t).slice(static_cast<int>(n) - 1, 1, t[n - 1], 2);
		}
		break;
	case L::BcastOuter:
		if (n >= 1) {
			Shape t = s;
			t[0] = 1;
			return Tensor::make(dt, t).expand(0, s[0]);
		}
		break;
	case L::BcastInner:
		if (n >= 1) {
			Shape t = s;
			t[n - 1] = 1;
			return Tensor::make(dt, t).expand(static_cast<int>(n) - 1, s[n - 1]);
		}
		break;
	default:
		break;
	}
	return Tensor::make(dt, s);
}

struct Combo {
	L out, a, b;
};
const Combo kCombos[] = {{L::Contig, L::Contig, L::Contig},
			 {L::Contig, L::Transposed, L::BcastOuter},
			 {L::Sliced, L::Sliced, L::Contig},
			 {L::Transposed, L::BcastInner, L::Transposed},
			 {L::Contig, L::Contig, L::BcastInner}};

// What the kernel computes with an input value: cast to the output's compute type.
double as_compute(int out_dt, int in_dt, double v)
{
	if (is_float(out_dt))
		return is_float(in_dt) ? v : to_f32(v);
	return is_float(in_dt) ? std::trunc(v) : v;
}

bool output_allows(uint16_t opc, int dt)
{
	switch (opc) {
	case NEURON_OP_SUB:
	case NEURON_OP_SUB_SCALAR:
	case NEURON_OP_RELU:
		return dt != NEURON_DTYPE_BOOL;
	case NEURON_OP_DIV:
	case NEURON_OP_DIV_SCALAR:
	case NEURON_OP_GELU:
	case NEURON_OP_SILU:
	case NEURON_OP_TANH:
	case NEURON_OP_EXP:
		return is_float(dt);
	default:
		return true;
	}
}

void fill_inputs(uint16_t opc, const Tensor &a, const Tensor &b, uint64_t seed)
{
	const bool u8 = a.dt == NEURON_DTYPE_U8;
	a.randomize(seed, u8 ? 0 : -20, 20);
	if (is_float(a.dt))
		a.randomize(seed, -4, 4);
	if (opc == NEURON_OP_DIV)
		b.randomize(seed + 1, 0.5, 4); // keep divisors away from 0
	else if (is_float(b.dt))
		b.randomize(seed + 1, -4, 4);
	else
		b.randomize(seed + 1, b.dt == NEURON_DTYPE_U8 ? 0 : -20, 20);
}

void binary_case(uint16_t opc, int odt, int adt, int bdt, const Shape &s, const Combo &c, double alpha, int threads = 4)
{
	const Tensor out = make_layout(odt, s, c.out), a = make_layout(adt, s, c.a), b = make_layout(bdt, s, c.b);
	fill_inputs(opc, a, b, s.size() * 31 + static_cast<uint64_t>(c.a));
	auto cmd = make_cmd(opc, {&out, &a, &b});
	if (opc == NEURON_OP_ADD || opc == NEURON_OP_SUB)
		cmd.fscalars.f[0] = alpha;
	run(cmd, {&out, &a, &b}, threads);
	const bool fl = is_float(odt);
	const double al = fl ? to_f32(alpha) : alpha;
	const std::string what = std::string(neuron::kernels::op_name(opc)) + " out " + shape_str(out) + " " +
				 lname(c.out) + ", a " + shape_str(a) + " " + lname(c.a) + ", b " + shape_str(b) + " " +
				 lname(c.b) + " alpha " + std::to_string(alpha);
	expect_tensor(
		out,
		[&](const int64_t *i) {
			const double x = as_compute(odt, adt, a.get(i)), y = as_compute(odt, bdt, b.get(i));
			switch (opc) {
			case NEURON_OP_ADD:
				return x + al * y;
			case NEURON_OP_SUB:
				return x - al * y;
			case NEURON_OP_MUL:
				return x * y;
			default:
				return x / y;
			}
		},
		tol_for(odt), what);
}

const uint16_t kBinary[] = {NEURON_OP_ADD, NEURON_OP_SUB, NEURON_OP_MUL, NEURON_OP_DIV};
const uint16_t kScalar[] = {NEURON_OP_ADD_SCALAR, NEURON_OP_SUB_SCALAR, NEURON_OP_MUL_SCALAR, NEURON_OP_DIV_SCALAR};

void scalar_case(uint16_t opc, int odt, int adt, const Shape &s, L la, L lo, bool reverse)
{
	const Tensor out = make_layout(odt, s, lo), a = make_layout(adt, s, la);
	if (is_float(adt))
		a.randomize(11, 0.5, 4); // reverse division divides by a
	else
		a.randomize(11, 1, 20);
	const bool fl = is_float(odt);
	auto cmd = make_cmd(opc, {&out, &a});
	cmd.iscalars[0] = reverse;
	if (fl)
		cmd.fscalars.f[0] = -1.75;
	else
		cmd.iscalars[1] = 5;
	run(cmd, {&out, &a});
	const double sv = fl ? -1.75 : 5;
	const std::string what = std::string(neuron::kernels::op_name(opc)) + (reverse ? " reversed" : "") + " out " +
				 shape_str(out) + " a " + shape_str(a) + " " + lname(la);
	expect_tensor(
		out,
		[&](const int64_t *i) {
			const double x = as_compute(odt, adt, a.get(i));
			switch (opc) {
			case NEURON_OP_ADD_SCALAR:
				return x + sv;
			case NEURON_OP_SUB_SCALAR:
				return reverse ? sv - x : x - sv;
			case NEURON_OP_MUL_SCALAR:
				return x * sv;
			default:
				return reverse ? sv / x : x / sv;
			}
		},
		tol_for(odt), what);
}

double unary_ref(uint16_t opc, bool tanh_form, double x)
{
	switch (opc) {
	case NEURON_OP_RELU:
		return x < 0 ? 0 : x;
	case NEURON_OP_GELU:
		if (tanh_form)
			return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
		return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
	case NEURON_OP_SILU:
		return x / (1 + std::exp(-x));
	case NEURON_OP_TANH:
		return std::tanh(x);
	default:
		return std::exp(x);
	}
}

void unary_case(uint16_t opc, bool tanh_form, int odt, int idt, const Shape &s, L li, L lo, int threads = 4)
{
	const Tensor out = make_layout(odt, s, lo), in = make_layout(idt, s, li);
	in.randomize(5, is_float(idt) ? -4 : (idt == NEURON_DTYPE_U8 ? 0 : -20), is_float(idt) ? 4 : 20);
	auto cmd = make_cmd(opc, {&out, &in});
	cmd.iscalars[0] = tanh_form;
	run(cmd, {&out, &in}, threads);
	const std::string what = std::string(neuron::kernels::op_name(opc)) + (tanh_form ? "(tanh)" : "") + " out " +
				 shape_str(out) + " " + lname(lo) + " in " + shape_str(in) + " " + lname(li);
	// Transcendentals in float lose a few ulp more than arithmetic.
	Tol t = tol_for(odt);
	if (odt == NEURON_DTYPE_F32 && opc != NEURON_OP_RELU)
		t = {1e-5, 2e-6};
	expect_tensor(out, [&](const int64_t *i) { return unary_ref(opc, tanh_form, as_compute(odt, idt, in.get(i))); }, t,
		      what);
}

} // namespace

Test(elementwise, binary_same_dtype_all_shapes_and_layouts)
{
	for (uint16_t opc : kBinary)
		for (int dt : kAllDtypes) {
			if (!output_allows(opc, dt))
				continue;
			for (const Shape &s : kShapes)
				for (const Combo &c : kCombos)
					binary_case(opc, dt, dt, dt, s, c, 1.0);
		}
}

Test(elementwise, binary_alpha)
{
	for (uint16_t opc : {NEURON_OP_ADD, NEURON_OP_SUB})
		for (int dt : kAllDtypes) {
			if (!output_allows(opc, dt))
				continue;
			const double alpha = is_float(dt) ? 2.5 : -3;
			binary_case(opc, dt, dt, dt, {3, 5}, kCombos[1], alpha);
			binary_case(opc, dt, dt, dt, {300, 257}, kCombos[0], alpha);
			binary_case(opc, dt, dt, dt, {4}, kCombos[0], 0.0);
		}
}

// A binary op with one f32 input broadcast along the innermost dim (stride 0: a
// row's mean or scale, elementwise.cpp broadcast_run) gives the bits of the same
// op on that input written out in full, on either side and with alpha.
Test(elementwise, broadcast_input_gives_the_bits_of_the_written_out_one)
{
	const int64_t R = 37, C = 70;
	for (uint16_t opc : kBinary)
		for (double alpha : {1.0, 2.5, -0.3})
			for (int side = 1; side <= 2; ++side) {
				if (alpha != 1.0 && opc != NEURON_OP_ADD && opc != NEURON_OP_SUB)
					continue;
				const Tensor col = Tensor::make(NEURON_DTYPE_F32, {R, 1}), other = Tensor::make(NEURON_DTYPE_F32, {R, C});
				col.randomize(41, 0.5, 4); // divisors away from 0, on either side
				other.randomize(42, 0.5, 4);
				const Tensor bcast = col.expand(1, C), full = Tensor::make(NEURON_DTYPE_F32, {R, C});
				for (int64_t r = 0; r < R; ++r)
					for (int64_t c = 0; c < C; ++c) {
						const int64_t i[2] = {r, c};
						full.set(i, bcast.get(i));
					}
				const Tensor out = Tensor::make(NEURON_DTYPE_F32, {R, C}), want = Tensor::make(NEURON_DTYPE_F32, {R, C});
				const Tensor &a1 = side == 1 ? bcast : other, &b1 = side == 1 ? other : bcast;
				const Tensor &a2 = side == 1 ? full : other, &b2 = side == 1 ? other : full;
				auto cmd = make_cmd(opc, {&out, &a1, &b1});
				auto ref_cmd = make_cmd(opc, {&want, &a2, &b2});
				if (opc == NEURON_OP_ADD || opc == NEURON_OP_SUB)
					cmd.fscalars.f[0] = ref_cmd.fscalars.f[0] = alpha;
				run(cmd, {&out, &a1, &b1});
				run(ref_cmd, {&want, &a2, &b2});
				for (int64_t r = 0; r < R; ++r)
					for (int64_t c = 0; c < C; ++c) {
						const int64_t i[2] = {r, c};
						cr_assert(out.get(i) == want.get(i), "%s alpha %g, input %d broadcast: (%ld, %ld) %.9g, "
										     "written out %.9g",
							  neuron::kernels::op_name(opc), alpha, side, (long)r, (long)c, out.get(i),
							  want.get(i));
					}
			}
}

Test(elementwise, binary_mixed_dtypes)
{
	struct M {
		int o, a, b;
	};
	const M ms[] = {{NEURON_DTYPE_F32, NEURON_DTYPE_I32, NEURON_DTYPE_BF16}, {NEURON_DTYPE_BF16, NEURON_DTYPE_F32, NEURON_DTYPE_U8},
			{NEURON_DTYPE_F16, NEURON_DTYPE_F16, NEURON_DTYPE_F32},  {NEURON_DTYPE_I64, NEURON_DTYPE_I32, NEURON_DTYPE_U8},
			{NEURON_DTYPE_I32, NEURON_DTYPE_BOOL, NEURON_DTYPE_I64}, {NEURON_DTYPE_F32, NEURON_DTYPE_BOOL, NEURON_DTYPE_F16},
			{NEURON_DTYPE_I64, NEURON_DTYPE_F32, NEURON_DTYPE_I64}};
	for (uint16_t opc : kBinary)
		for (const M &m : ms) {
			if (!output_allows(opc, m.o))
				continue;
			for (const Combo &c : kCombos) {
				binary_case(opc, m.o, m.a, m.b, {2, 3, 4}, c, 1.0);
				binary_case(opc, m.o, m.a, m.b, {300, 257}, c, 1.0);
			}
		}
}

Test(elementwise, bool_logic_and_integer_wrap)
{
	// bool + bool is logical or, bool * bool logical and (PyTorch).
	binary_case(NEURON_OP_ADD, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL, {8}, kCombos[0], 1.0);
	binary_case(NEURON_OP_MUL, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL, NEURON_DTYPE_BOOL, {8}, kCombos[0], 1.0);
	// i32 overflow wraps.
	Tensor out = Tensor::make(NEURON_DTYPE_I32, {2}), a = Tensor::make(NEURON_DTYPE_I32, {2}), b = Tensor::make(NEURON_DTYPE_I32, {2});
	int64_t i = 0;
	a.set(&i, 2147483647);
	b.set(&i, 1);
	i = 1;
	a.set(&i, -2147483648.0);
	b.set(&i, 1);
	auto cmd = make_cmd(NEURON_OP_SUB, {&out, &a, &b});
	cmd.fscalars.f[0] = 2;
	run(cmd, {&out, &a, &b});
	i = 0;
	cr_assert_eq(out.get(&i), 2147483645.0);
	i = 1;
	cr_assert_eq(out.get(&i), 2147483646.0, "-2^31 - 2 wraps to 2^31 - 2");
	// u8 subtraction wraps.
	Tensor o8 = Tensor::make(NEURON_DTYPE_U8, {1}), a8 = Tensor::make(NEURON_DTYPE_U8, {1}), b8 = Tensor::make(NEURON_DTYPE_U8, {1});
	i = 0;
	a8.set(&i, 3);
	b8.set(&i, 5);
	auto c8 = make_cmd(NEURON_OP_SUB, {&o8, &a8, &b8});
	c8.fscalars.f[0] = 1;
	run(c8, {&o8, &a8, &b8});
	cr_assert_eq(o8.get(&i), 254.0);
}

Test(elementwise, scalar_ops)
{
	for (uint16_t opc : kScalar)
		for (int dt : kAllDtypes) {
			if (!output_allows(opc, dt))
				continue;
			for (bool rev : {false, true})
				for (const Shape &s : kShapes) {
					scalar_case(opc, dt, dt, s, L::Contig, L::Contig, rev);
					scalar_case(opc, dt, dt, s, L::Transposed, L::Sliced, rev);
					scalar_case(opc, dt, dt, s, L::BcastOuter, L::Contig, rev);
				}
		}
	// Mixed: integer tensor with a float scalar gives a float output.
	for (uint16_t opc : kScalar) {
		scalar_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_I64, {5, 7}, L::Contig, L::Contig, true);
		scalar_case(opc, NEURON_DTYPE_BF16, NEURON_DTYPE_U8, {300, 257}, L::Transposed, L::Contig, false);
	}
}

Test(elementwise, unary_ops)
{
	const uint16_t ops[] = {NEURON_OP_RELU, NEURON_OP_GELU, NEURON_OP_SILU, NEURON_OP_TANH, NEURON_OP_EXP};
	for (uint16_t opc : ops)
		for (int dt : kAllDtypes) {
			if (!output_allows(opc, dt))
				continue;
			for (bool tf : {false, true}) {
				if (tf && opc != NEURON_OP_GELU)
					continue;
				for (const Shape &s : kShapes) {
					unary_case(opc, tf, dt, dt, s, L::Contig, L::Contig);
					unary_case(opc, tf, dt, dt, s, L::Transposed, L::Contig);
					unary_case(opc, tf, dt, dt, s, L::Sliced, L::Transposed);
					unary_case(opc, tf, dt, dt, s, L::BcastInner, L::Contig);
				}
			}
		}
	// Promotion: integer input, floating output; narrow output from f32 input.
	unary_case(NEURON_OP_EXP, false, NEURON_DTYPE_F32, NEURON_DTYPE_I32, {3, 5}, L::Transposed, L::Contig);
	unary_case(NEURON_OP_GELU, true, NEURON_DTYPE_BF16, NEURON_DTYPE_F32, {520, 513}, L::Contig, L::Contig);
	unary_case(NEURON_OP_RELU, false, NEURON_DTYPE_I64, NEURON_DTYPE_I32, {3, 5}, L::Sliced, L::Contig);
	unary_case(NEURON_OP_TANH, false, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {520, 513}, L::Contig, L::Contig, 1);
}

Test(elementwise, unary_special_values)
{
	const double xs[] = {NAN, INFINITY, -INFINITY, 100, -100, 0, -0.0, 1e-30};
	const uint16_t ops[] = {NEURON_OP_RELU, NEURON_OP_GELU, NEURON_OP_SILU, NEURON_OP_TANH, NEURON_OP_EXP};
	for (uint16_t opc : ops) {
		Tensor in = Tensor::make(NEURON_DTYPE_F32, {8}), out = Tensor::make(NEURON_DTYPE_F32, {8});
		for (int64_t i = 0; i < 8; ++i)
			in.set(&i, xs[i]);
		auto cmd = make_cmd(opc, {&out, &in});
		run(cmd, {&out, &in});
		expect_tensor(
			out,
			[&](const int64_t *i) -> double {
				const double x = in.get(i);
				if (opc == NEURON_OP_GELU && std::isinf(x))
					return x > 0 ? x : NAN; // -inf * 0 in the erf form
				if (opc == NEURON_OP_SILU && x == -INFINITY)
					return NAN; // -inf / inf
				return unary_ref(opc, false, x);
			},
			{1e-6, 1e-30}, std::string("specials ") + neuron::kernels::op_name(opc));
	}
}

Test(elementwise, large_parallel)
{
	// > 2 x 2^19 elements: arithmetic is split among threads (transcendentals
	// already at {520, 513} above).
	const Shape big = {1030, 1025};
	for (uint16_t opc : kBinary) {
		binary_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, NEURON_DTYPE_F32, big, kCombos[0], 1.0);
		binary_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, NEURON_DTYPE_F32, big, kCombos[1], 1.0);
		binary_case(opc, NEURON_DTYPE_BF16, NEURON_DTYPE_BF16, NEURON_DTYPE_F32, big, kCombos[3], 1.0);
		binary_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, NEURON_DTYPE_F32, big, kCombos[2], 1.0, 1);
		if (opc != NEURON_OP_DIV)
			binary_case(opc, NEURON_DTYPE_I64, NEURON_DTYPE_I32, NEURON_DTYPE_I64, big, kCombos[4], 1.0);
	}
	for (uint16_t opc : kScalar) {
		scalar_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, big, L::Contig, L::Contig, true);
		scalar_case(opc, NEURON_DTYPE_F16, NEURON_DTYPE_F32, big, L::Transposed, L::Contig, false);
	}
	unary_case(NEURON_OP_RELU, false, NEURON_DTYPE_F32, NEURON_DTYPE_F32, big, L::Contig, L::Contig);
	unary_case(NEURON_OP_RELU, false, NEURON_DTYPE_I32, NEURON_DTYPE_I32, big, L::Transposed, L::Contig);
}

Test(elementwise, exact_in_place)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_I64}) {
		for (L l : {L::Contig, L::Transposed, L::Sliced}) {
			const Tensor a = make_layout(dt, {1030, 1025}, l), b = make_layout(dt, {1030, 1025}, L::Contig);
			fill_inputs(NEURON_OP_ADD, a, b, 9);
			const Tensor old = a.clone();
			auto cmd = make_cmd(NEURON_OP_ADD, {&a, &a, &b});
			cmd.fscalars.f[0] = 1;
			run(cmd, {&a, &a, &b});
			expect_tensor(a, [&](const int64_t *i) { return old.get(i) + b.get(i); }, tol_for(dt), "add in place");
			auto u = make_cmd(NEURON_OP_RELU, {&a, &a});
			run(u, {&a, &a});
			expect_tensor(a, [&](const int64_t *i) { return std::max(0.0, quantize(dt, old.get(i) + b.get(i))); },
				      tol_for(dt), "relu in place");
		}
	}
	for (uint16_t opc : {NEURON_OP_ADD, NEURON_OP_MUL, NEURON_OP_DIV, NEURON_OP_ADD_SCALAR, NEURON_OP_RELU, NEURON_OP_EXP,
			     NEURON_OP_FILL, NEURON_OP_COPY})
		cr_assert(neuron::kernels::output_may_alias_inputs(static_cast<neuron_opcode>(opc)));
	for (uint16_t opc : {NEURON_OP_MATMUL, NEURON_OP_SUM, NEURON_OP_MEAN, NEURON_OP_AMAX, NEURON_OP_SOFTMAX, NEURON_OP_NOP})
		cr_assert(!neuron::kernels::output_may_alias_inputs(static_cast<neuron_opcode>(opc)));
}

Test(elementwise, exp_accuracy_full_range)
{
	// The kernels' vectorised exp: within 2 ulp of the true value over the whole
	// float range, subnormal results included; overflow to inf, underflow to 0.
	Tensor in = Tensor::make(NEURON_DTYPE_F32, {200003}), out = Tensor::make(NEURON_DTYPE_F32, {200003});
	in.randomize(99, -104.5, 89.5);
	int64_t i = 0;
	for (double x : {0.0, -0.0, 1.0, -1.0, 88.72, 88.73, -87.33, -103.9, -150.0, 1e-8, 0.34657359}) {
		in.set(&i, x);
		++i;
	}
	auto cmd = make_cmd(NEURON_OP_EXP, {&out, &in});
	run(cmd, {&out, &in});
	expect_tensor(out, [&](const int64_t *j) { return std::exp(in.get(j)); }, {2.4e-7, 0x1p-148}, "exp full range");
	// SILU shares it. (Below x = -88.7, exp(-x) overflows float and x / inf is -0
	// where the true value is a tiny subnormal: hence the absolute slack.)
	auto s = make_cmd(NEURON_OP_SILU, {&out, &in});
	run(s, {&out, &in});
	expect_tensor(out, [&](const int64_t *j) { const double x = in.get(j); return x / (1 + std::exp(-x)); },
		      {5e-7, 3e-37}, "silu full range");
}
