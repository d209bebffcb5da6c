// ISA 1.4 against references computed here in double: the new UNARY_MATH and
// BINARY_MATH functions (special functions checked through independent identities:
// digamma as the derivative of lgamma, erfinv through erf, i0 by its series), SCAN
// (every function, dim, layout and dtype; init; wrap-around), SORT (stable, NaN
// order, top-k, descending, integer keys beyond 2^53), ATTENTION (masks, causal
// diagonal, broadcast key heads, rows that see nothing, dtypes), and the rejections.
#include "ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace ref;

namespace {

neuron_cmd math_cmd(uint16_t op, int fn, std::vector<const Tensor *> ops)
{
	auto c = make_cmd(op, std::move(ops));
	c.iscalars[0] = fn;
	return c;
}

double lgamma_ref(double x) { return std::lgamma(x); }

double digamma_ref(double x) // central difference of lgamma (h^2 error ~1e-8)
{
	const double h = 1e-4;
	return (std::lgamma(x + h) - std::lgamma(x - h)) / (2 * h);
}

double i0_ref(double x) // sum over k of (x/2)^(2k) / (k!)^2
{
	double term = 1, sum = 1;
	for (int k = 1; k < 200; ++k) {
		term *= (x / 2) * (x / 2) / (static_cast<double>(k) * k);
		sum += term;
	}
	return sum;
}

struct UnaryCase {
	int fn;
	double lo, hi;
	std::function<double(double)> f;
	double f0 = 0, f1 = 0, f2 = 0;
	int64_t i1 = 0;
	double rtol = 2e-6;
};

std::vector<UnaryCase> unary_cases()
{
	const double pi = 3.14159265358979323846;
	return {
		{NEURON_UNARY_SIN, -10, 10, [](double x) { return std::sin(x); }},
		{NEURON_UNARY_COS, -10, 10, [](double x) { return std::cos(x); }},
		{NEURON_UNARY_TAN, -1.4, 1.4, [](double x) { return std::sin(x) / std::cos(x); }},
		{NEURON_UNARY_ASIN, -1, 1, [](double x) { return std::atan2(x, std::sqrt(1 - x * x)); }},
		{NEURON_UNARY_ACOS, -1, 1, [](double x) { return std::atan2(std::sqrt(1 - x * x), x); }},
		{NEURON_UNARY_ATAN, -20, 20, [](double x) { return std::asin(x / std::sqrt(1 + x * x)); }},
		{NEURON_UNARY_SINH, -5, 5, [](double x) { return (std::exp(x) - std::exp(-x)) / 2; }},
		{NEURON_UNARY_COSH, -5, 5, [](double x) { return (std::exp(x) + std::exp(-x)) / 2; }},
		{NEURON_UNARY_ASINH, -50, 50, [](double x) { return std::log(x + std::sqrt(x * x + 1)); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_ACOSH, 1, 50, [](double x) { return std::log(x + std::sqrt(x * x - 1)); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_ATANH, -0.99, 0.99, [](double x) { return 0.5 * std::log((1 + x) / (1 - x)); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_LOG1P, -0.9, 10, [](double x) { return std::log(1 + x); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_EXPM1, -5, 5, [](double x) { return std::exp(x) - 1; }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_LOG2, 0.01, 100, [](double x) { return std::log(x) / std::log(2.0); }},
		{NEURON_UNARY_LOG10, 0.01, 100, [](double x) { return std::log(x) / std::log(10.0); }},
		{NEURON_UNARY_EXP2, -20, 20, [](double x) { return std::pow(2.0, x); }},
		{NEURON_UNARY_FLOOR, -9, 9, [](double x) { return std::floor(x); }},
		{NEURON_UNARY_CEIL, -9, 9, [](double x) { return std::ceil(x); }},
		{NEURON_UNARY_ROUND, -9, 9,
		 [](double x) { // half to even, written out
			 const double f = std::floor(x), d = x - f;
			 return d > 0.5 ? f + 1 : d < 0.5 ? f : (std::fmod(f, 2) == 0 ? f : f + 1);
		 }},
		{NEURON_UNARY_TRUNC, -9, 9, [](double x) { return x < 0 ? std::ceil(x) : std::floor(x); }},
		{NEURON_UNARY_FRAC, -9, 9, [](double x) { return x - (x < 0 ? std::ceil(x) : std::floor(x)); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_SIGN, -3, 3, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }}, // NaN: 0 (see nan test)
		{NEURON_UNARY_LGAMMA, 0.1, 20, lgamma_ref, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_DIGAMMA, 0.5, 20, digamma_ref, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_DIGAMMA, -3.9, -3.1, digamma_ref, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_ERFC, -3, 3, [](double x) { return 1 - std::erf(x); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_I0, -15, 15, i0_ref, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_LEAKY_RELU, -3, 3, [](double x) { return x > 0 ? x : 0.2 * x; }, 0.2},
		{NEURON_UNARY_SOFTPLUS, -10, 10,
		 [](double x) { return 2 * x > 15 ? x : std::log(1 + std::exp(2 * x)) / 2; }, 2, 15, 0, 0, 1e-5},
		{NEURON_UNARY_ELU, -3, 3, [](double x) { return x > 0 ? 1.5 * x : 1.5 * 0.7 * (std::exp(2 * x) - 1); }, 0.7,
		 1.5, 2, 0, 1e-5},
		{NEURON_UNARY_HARDSIGMOID, -5, 5, [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
		{NEURON_UNARY_HARDSWISH, -5, 5, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
		{NEURON_UNARY_MISH, -5, 5, [](double x) { return x * std::tanh(std::log(1 + std::exp(x))); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_LOGIT, 0.01, 0.99, [](double x) { return std::log(x) - std::log(1 - x); }, 0, 0, 0, 0, 1e-5},
		{NEURON_UNARY_LOGIT, -0.5, 1.5,
		 [](double x) {
			 const double y = std::clamp(x, 0.1, 0.9);
			 return std::log(y) - std::log(1 - y);
		 },
		 0.1, 0, 0, 1, 1e-5},
		{NEURON_UNARY_ROUND_DECIMALS, -9, 9, [](double x) { return std::nearbyint(x * 100) / 100; }, 100},
		{NEURON_UNARY_ROUND_DECIMALS, -900, 900, [](double x) { return std::nearbyint(x / 100) * 100; }, 100, 0, 0, 1},
		{NEURON_UNARY_SINC, -4, 4,
		 [pi](double x) { return x == 0 ? 1.0 : std::sin(pi * x) / (pi * x); }, 0, 0, 0, 0, 1e-5},
	};
}

} // namespace

Test(isa14_math, unary_functions)
{
	for (const UnaryCase &c : unary_cases())
		for (int dt : kFloatDtypes) {
			const Tensor in = Tensor::make(dt, {37, 11});
			in.randomize(static_cast<uint64_t>(c.fn) * 7 + 1, c.lo, c.hi);
			const Tensor x = in.transpose(0, 1); // strided
			const Tensor out = Tensor::make(dt, {11, 37});
			auto cmd = math_cmd(NEURON_OP_UNARY_MATH, c.fn, {&out, &x});
			cmd.fscalars.f[0] = c.f0, cmd.fscalars.f[1] = c.f1, cmd.fscalars.f[2] = c.f2;
			cmd.iscalars[1] = c.i1;
			run(cmd, {&out, &x});
			Tol t = tol_for(dt);
			t.rtol = std::max(t.rtol, c.rtol);
			t.atol = std::max(t.atol, dt == NEURON_DTYPE_F32 ? 1e-6 : t.atol);
			expect_tensor(out, [&](const int64_t *i) { return c.f(x.get(i)); }, t,
				      std::string("unary fn ") + std::to_string(c.fn) + " " + dname(dt));
		}
}

Test(isa14_math, erfinv_inverts_erf)
{
	const Tensor in = Tensor::make(NEURON_DTYPE_F32, {2000});
	in.randomize(5, -0.999, 0.999);
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {2000});
	run(math_cmd(NEURON_OP_UNARY_MATH, NEURON_UNARY_ERFINV, {&out, &in}), {&out, &in});
	expect_tensor(out, [&](const int64_t *i) { // solve erf(y) = x by bisection, in double
		const double x = in.get(i);
		double lo = -6, hi = 6;
		for (int it = 0; it < 200; ++it) {
			const double mid = (lo + hi) / 2;
			(std::erf(mid) < x ? lo : hi) = mid;
		}
		return (lo + hi) / 2;
	}, {2e-5, 1e-6}, "erfinv");
}

Test(isa14_math, binary_functions)
{
	struct Case {
		int fn;
		std::function<double(double, double)> f;
		double f0 = 0, f1 = 0, f2 = 0;
		int64_t i1 = 0;
		double blo = -4, bhi = 4;
	};
	const std::vector<Case> cases = {
		{NEURON_BINARY_ATAN2, [](double a, double b) { return std::atan2(a, b); }},
		{NEURON_BINARY_FMOD, [](double a, double b) { return a - b * std::trunc(a / b); }, 0, 0, 0, 0, 0.5, 3},
		{NEURON_BINARY_REMAINDER, [](double a, double b) { return a - b * std::floor(a / b); }, 0, 0, 0, 0, -3, -0.5},
		{NEURON_BINARY_HYPOT, [](double a, double b) { return std::sqrt(a * a + b * b); }},
		{NEURON_BINARY_COPYSIGN, [](double a, double b) { return (b < 0 ? -1 : 1) * std::fabs(a); }},
		{NEURON_BINARY_LOGADDEXP, [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }},
		{NEURON_BINARY_LOGADDEXP2, [](double a, double b) { return std::log2(std::exp2(a) + std::exp2(b)); }},
		{NEURON_BINARY_XLOGY, [](double a, double b) { return a * std::log(b); }, 0, 0, 0, 0, 0.1, 5},
		{NEURON_BINARY_FLOOR_DIVIDE, [](double a, double b) { return std::floor(a / b); }, 0, 0, 0, 0, 0.3, 3},
		{NEURON_BINARY_LEAKY_RELU_BACKWARD, [](double g, double x) { return x > 0 ? g : 0.1 * g; }, 0.1},
		{NEURON_BINARY_SOFTPLUS_BACKWARD,
		 [](double g, double x) { return 2 * x > 5 ? g : g / (1 + std::exp(-2 * x)); }, 2, 5},
		{NEURON_BINARY_ELU_BACKWARD, [](double g, double x) { return x > 0 ? 1.5 * g : g * 1.5 * 0.7 * 2 * std::exp(2 * x); },
		 0.7, 1.5, 2},
		{NEURON_BINARY_HARDTANH_BACKWARD, [](double g, double x) { return x > -1 && x < 2 ? g : 0; }, -1, 2},
		{NEURON_BINARY_HARDSIGMOID_BACKWARD, [](double g, double x) { return std::fabs(x) < 3 ? g / 6 : 0; }},
		{NEURON_BINARY_HARDSWISH_BACKWARD,
		 [](double g, double x) { return x < -3 ? 0 : x > 3 ? g : g * (2 * x + 3) / 6; }},
		{NEURON_BINARY_MISH_BACKWARD,
		 [](double g, double x) {
			 const double h = 1e-5;
			 auto mish = [](double y) { return y * std::tanh(std::log(1 + std::exp(y))); };
			 return g * (mish(x + h) - mish(x - h)) / (2 * h);
		 }},
		{NEURON_BINARY_LOGIT_BACKWARD, [](double g, double x) { return g / (x * (1 - x)); }, 0, 0, 0, 0, 0.05, 0.95},
	};
	for (const Case &c : cases)
		for (int dt : kFloatDtypes) {
			const Tensor a = Tensor::make(dt, {9, 13}), b = Tensor::make(dt, {13, 9});
			a.randomize(static_cast<uint64_t>(c.fn) + 3);
			b.randomize(static_cast<uint64_t>(c.fn) + 4, c.blo, c.bhi);
			const Tensor bt = b.transpose(0, 1);
			const Tensor out = Tensor::make(dt, {9, 13});
			auto cmd = math_cmd(NEURON_OP_BINARY_MATH, c.fn, {&out, &a, &bt});
			cmd.fscalars.f[0] = c.f0, cmd.fscalars.f[1] = c.f1, cmd.fscalars.f[2] = c.f2;
			cmd.iscalars[1] = c.i1;
			run(cmd, {&out, &a, &bt});
			Tol t = tol_for(dt);
			t.rtol = std::max(t.rtol, 2e-5);
			t.atol = std::max(t.atol, 1e-5);
			expect_tensor(out, [&](const int64_t *i) { return c.f(a.get(i), bt.get(i)); }, t,
				      std::string("binary fn ") + std::to_string(c.fn) + " " + dname(dt));
		}
}

// ---- SCAN ----

namespace {

double scan_step(int fn, double acc, double x, bool integer)
{
	switch (fn) {
	case NEURON_SCAN_SUM: return acc + x;
	case NEURON_SCAN_PROD: return acc * x;
	case NEURON_SCAN_MAX: return std::isnan(acc) || std::isnan(x) ? (std::isnan(acc) ? acc : x) : std::max(acc, x);
	case NEURON_SCAN_MIN: return std::isnan(acc) || std::isnan(x) ? (std::isnan(acc) ? acc : x) : std::min(acc, x);
	default: {
		(void)integer;
		const double m = std::max(acc, x);
		return m == -INFINITY ? m : m + std::log(std::exp(acc - m) + std::exp(x - m));
	}
	}
}

void scan_case(int fn, const Tensor &in, int dim, int odt, double init_value, const std::string &what)
{
	const Tensor out = Tensor::make(odt, in.shape());
	std::vector<int64_t> ishape = in.shape();
	if (in.ndim)
		ishape[static_cast<size_t>(dim)] = 1;
	const Tensor init = Tensor::make(odt, ishape);
	init.each([&](const int64_t *i) { init.set(i, init_value); });
	auto cmd = make_cmd(NEURON_OP_SCAN, {&out, &in, &init});
	cmd.iscalars[0] = dim;
	cmd.iscalars[1] = fn;
	run(cmd, {&out, &in, &init});
	const bool integer = !is_float(odt);
	expect_tensor(out, [&](const int64_t *idx) {
		int64_t j[NEURON_MAX_DIMS];
		std::copy(idx, idx + std::max(in.ndim, 1), j);
		double acc = init_value;
		const int64_t last = in.ndim ? idx[dim] : 0;
		for (int64_t k = 0; k <= last; ++k) {
			if (in.ndim)
				j[dim] = k;
			double x = in.get(j);
			if (integer)
				x = std::trunc(x);
			acc = scan_step(fn, acc, x, integer);
		}
		return acc;
	}, is_float(odt) ? Tol{2e-5, 1e-5} : Tol{0, 0}, what + " fn " + std::to_string(fn) + " dim " + std::to_string(dim) + " " + shape_str(in));
}

} // namespace

Test(isa14_scan, functions_dims_layouts_dtypes)
{
	for (int fn : {NEURON_SCAN_SUM, NEURON_SCAN_PROD, NEURON_SCAN_MAX, NEURON_SCAN_MIN, NEURON_SCAN_LOGSUMEXP}) {
		const double init = fn == NEURON_SCAN_PROD ? 1 : fn == NEURON_SCAN_SUM ? 0.5 : fn == NEURON_SCAN_MIN ? INFINITY : -INFINITY;
		for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_F16}) {
			const Tensor a = Tensor::make(dt, {4, 9, 3});
			a.randomize(static_cast<uint64_t>(fn) * 3 + static_cast<uint64_t>(dt), fn == NEURON_SCAN_PROD ? 0.5 : -3,
				    fn == NEURON_SCAN_PROD ? 1.5 : 3);
			for (int d = 0; d < 3; ++d) {
				scan_case(fn, a, d, dt, init, "contiguous");
				scan_case(fn, a.transpose(0, 2), d, dt, init, "transposed");
				scan_case(fn, a.slice(1, 1, 9, 2), d, NEURON_DTYPE_F32, init, "sliced, f32 out");
			}
		}
		if (fn == NEURON_SCAN_LOGSUMEXP)
			continue;
		for (int dt : {NEURON_DTYPE_I32, NEURON_DTYPE_I64, NEURON_DTYPE_U8, NEURON_DTYPE_BOOL}) {
			const Tensor a = Tensor::make(dt, {6, 5});
			a.randomize(9, dt == NEURON_DTYPE_U8 ? 0 : -3, 3);
			const double iinit = fn == NEURON_SCAN_PROD ? 1 : fn == NEURON_SCAN_MAX ? -1e9 : fn == NEURON_SCAN_MIN ? 1e9 : 0;
			for (int d = 0; d < 2; ++d)
				scan_case(fn, a, d, NEURON_DTYPE_I64, iinit, std::string("integer ") + dname(dt));
		}
	}
	const Tensor s = Tensor::make(NEURON_DTYPE_F32, {});
	s.randomize(1);
	scan_case(NEURON_SCAN_SUM, s, 0, NEURON_DTYPE_F32, 2, "0-d");
	const Tensor longrow = Tensor::make(NEURON_DTYPE_F32, {3000}); // several blocks
	longrow.randomize(2);
	scan_case(NEURON_SCAN_SUM, longrow, 0, NEURON_DTYPE_F32, 0, "long row");
}

Test(isa14_scan, nan_and_wrapping)
{
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {6});
	const double v[6] = {1, 5, NAN, 7, -2, 9};
	for (int64_t i = 0; i < 6; ++i)
		a.set(&i, v[i]);
	scan_case(NEURON_SCAN_MAX, a, 0, NEURON_DTYPE_F32, -INFINITY, "nan");
	scan_case(NEURON_SCAN_MIN, a, 0, NEURON_DTYPE_F32, INFINITY, "nan");
	scan_case(NEURON_SCAN_SUM, a, 0, NEURON_DTYPE_F32, 0, "nan");
	// int64 sums wrap as PyTorch's do: INT64_MAX + 1 = INT64_MIN.
	const Tensor big = Tensor::make(NEURON_DTYPE_I64, {2});
	const int64_t vals[2] = {INT64_MAX, 1};
	std::memcpy(big.base(), vals, sizeof(vals));
	const Tensor out = Tensor::make(NEURON_DTYPE_I64, {2}), init = Tensor::make(NEURON_DTYPE_I64, {1});
	std::memset(init.base(), 0, 8);
	auto cmd = make_cmd(NEURON_OP_SCAN, {&out, &big, &init});
	run(cmd, {&out, &big, &init});
	int64_t got[2];
	std::memcpy(got, out.base(), sizeof(got));
	cr_assert_eq(got[0], INT64_MAX);
	cr_assert_eq(got[1], INT64_MIN);
}

// ---- SORT ----

namespace {

void sort_case(const Tensor &in, int dim, bool desc, int64_t k, const std::string &what)
{
	std::vector<int64_t> oshape = in.shape();
	if (in.ndim)
		oshape[static_cast<size_t>(dim)] = k;
	const Tensor vals = Tensor::make(in.dt, oshape), idx = Tensor::make(NEURON_DTYPE_I64, oshape);
	auto cmd = make_cmd(NEURON_OP_SORT, {&vals, &idx, &in});
	cmd.iscalars[0] = dim;
	cmd.iscalars[1] = desc ? 1 : 0;
	run(cmd, {&vals, &idx, &in});
	// Reference: per row, indices ordered by (key, position), NaN last (first when
	// descending), ties by position.
	auto ref_order = [&](const int64_t *at) {
		const int64_t len = in.ndim ? in.sizes[dim] : 1;
		std::vector<int64_t> order(static_cast<size_t>(len));
		std::iota(order.begin(), order.end(), 0);
		int64_t j[NEURON_MAX_DIMS];
		std::copy(at, at + std::max(in.ndim, 1), j);
		std::vector<double> key(static_cast<size_t>(len));
		for (int64_t p = 0; p < len; ++p) {
			if (in.ndim)
				j[dim] = p;
			key[static_cast<size_t>(p)] = in.get(j);
		}
		auto rank = [&](int64_t p) { // NaN above everything
			const double x = key[static_cast<size_t>(p)];
			return std::isnan(x) ? std::make_pair(1, 0.0) : std::make_pair(0, x);
		};
		std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
			return desc ? rank(b) < rank(a) : rank(a) < rank(b);
		});
		return order;
	};
	expect_tensor(idx, [&](const int64_t *i) { return static_cast<double>(ref_order(i)[static_cast<size_t>(in.ndim ? i[dim] : 0)]); },
		      {0, 0}, what + " indices");
	expect_tensor(vals, [&](const int64_t *i) {
		int64_t j[NEURON_MAX_DIMS];
		std::copy(i, i + std::max(in.ndim, 1), j);
		if (in.ndim)
			j[dim] = ref_order(i)[static_cast<size_t>(i[dim])];
		return in.get(j);
	}, {0, 0}, what + " values");
}

} // namespace

Test(isa14_sort, full_topk_layouts_dtypes)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_F16, NEURON_DTYPE_I32, NEURON_DTYPE_I64,
		       NEURON_DTYPE_U8, NEURON_DTYPE_BOOL}) {
		const Tensor a = Tensor::make(dt, {5, 40, 3});
		a.randomize(static_cast<uint64_t>(dt) + 40, dt == NEURON_DTYPE_U8 ? 0 : -5, 5); // many ties
		for (bool desc : {false, true})
			for (int d = 0; d < 3; ++d) {
				const int64_t n = a.sizes[d];
				sort_case(a, d, desc, n, std::string("full ") + dname(dt));
				sort_case(a.transpose(0, 1), d, desc, std::min<int64_t>(n, 2), std::string("top-2 transposed ") + dname(dt));
				sort_case(a.slice(1, 3, 40, 3), d, desc, 1, std::string("top-1 sliced ") + dname(dt));
			}
	}
	const Tensor s = Tensor::make(NEURON_DTYPE_F32, {});
	s.randomize(4);
	sort_case(s, 0, false, 1, "0-d");
}

Test(isa14_sort, nan_order_and_exact_int64)
{
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {7});
	const double v[7] = {3, NAN, -INFINITY, 3, INFINITY, NAN, -1};
	for (int64_t i = 0; i < 7; ++i)
		a.set(&i, v[i]);
	sort_case(a, 0, false, 7, "nan ascending");
	sort_case(a, 0, true, 7, "nan descending");
	sort_case(a, 0, true, 3, "nan top-3");
	// 2^53 + 1 and 2^53 differ only in int64: compared exactly.
	const Tensor big = Tensor::make(NEURON_DTYPE_I64, {2});
	const int64_t vals[2] = {(int64_t{1} << 53) + 1, int64_t{1} << 53};
	std::memcpy(big.base(), vals, sizeof(vals));
	const Tensor ov = Tensor::make(NEURON_DTYPE_I64, {2}), oi = Tensor::make(NEURON_DTYPE_I64, {2});
	auto cmd = make_cmd(NEURON_OP_SORT, {&ov, &oi, &big});
	run(cmd, {&ov, &oi, &big});
	int64_t got[2];
	std::memcpy(got, oi.base(), sizeof(got));
	cr_assert(got[0] == 1 && got[1] == 0, "int64 keys compared in double: got %ld %ld", got[0], got[1]);
}

// ---- torch.special's functions, against series, identities and closed forms ----

namespace {

double bessel_series(int nu, double x, bool modified) // sum (+-1)^k (x/2)^(2k+nu) / (k! (k+nu)!)
{
	double term = std::pow(x / 2, nu) / std::tgamma(nu + 1.0), sum = 0;
	for (int k = 0; k < 80; ++k) {
		sum += term;
		term *= (modified ? 1 : -1) * (x / 2) * (x / 2) / ((k + 1.0) * (k + 1.0 + nu));
	}
	return sum;
}

double ndtr_ref(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Runs one UNARY_MATH / BINARY_MATH function over values and returns the f32 results.
std::vector<double> eval(int op, int fn, const std::vector<double> &a, const std::vector<double> &b = {}, double f0 = 0)
{
	const int64_t n = static_cast<int64_t>(a.size());
	const Tensor ta = Tensor::make(NEURON_DTYPE_F32, {n}), tb = Tensor::make(NEURON_DTYPE_F32, {n}),
		     out = Tensor::make(NEURON_DTYPE_F32, {n});
	for (int64_t i = 0; i < n; ++i) {
		ta.set(&i, a[size_t(i)]);
		tb.set(&i, b.empty() ? 0 : b[size_t(i)]);
	}
	auto cmd = op == NEURON_OP_UNARY_MATH ? make_cmd(op, {&out, &ta}) : make_cmd(op, {&out, &ta, &tb});
	cmd.iscalars[0] = fn;
	cmd.fscalars.f[0] = f0;
	if (op == NEURON_OP_UNARY_MATH)
		run(cmd, {&out, &ta});
	else
		run(cmd, {&out, &ta, &tb});
	std::vector<double> r(static_cast<size_t>(n));
	for (int64_t i = 0; i < n; ++i)
		r[size_t(i)] = out.get(&i);
	return r;
}

void expect_values(const std::vector<double> &got, const std::vector<double> &want, double rtol, const char *what)
{
	for (size_t i = 0; i < want.size(); ++i) {
		const double g = got[i], w = static_cast<float>(want[i]);
		const bool ok = (std::isnan(w) && std::isnan(g)) || (std::isinf(w) && g == w) ||
				std::fabs(g - w) <= rtol * (1 + std::fabs(w));
		cr_assert(ok, "%s[%zu]: got %.9g, expected %.9g", what, i, g, w);
	}
}

} // namespace

Test(isa14_special, bessel_airy_and_normal)
{
	std::vector<double> xs;
	for (double x = 0.05; x < 6; x += 0.37)
		xs.push_back(x);
	auto map = [&](std::function<double(double)> f) {
		std::vector<double> r;
		for (double x : xs)
			r.push_back(f(x));
		return r;
	};
	const int U = NEURON_OP_UNARY_MATH;
	expect_values(eval(U, NEURON_UNARY_BESSEL_J0, xs), map([](double x) { return bessel_series(0, x, false); }), 1e-5, "j0");
	expect_values(eval(U, NEURON_UNARY_BESSEL_J1, xs), map([](double x) { return bessel_series(1, x, false); }), 1e-5, "j1");
	expect_values(eval(U, NEURON_UNARY_MODIFIED_BESSEL_I1, xs), map([](double x) { return bessel_series(1, x, true); }),
		      1e-5, "i1");
	expect_values(eval(U, NEURON_UNARY_I1E, xs),
		      map([](double x) { return std::exp(-x) * bessel_series(1, x, true); }), 1e-5, "i1e");
	expect_values(eval(U, NEURON_UNARY_I0E, xs),
		      map([](double x) { return std::exp(-x) * bessel_series(0, x, true); }), 1e-5, "i0e");
	// Y and K through their Wronskians with J and I: J1 Y0 - J0 Y1 = 2 / (pi x), I0 K1 + I1 K0 = 1 / x.
	const auto y0 = eval(U, NEURON_UNARY_BESSEL_Y0, xs), y1 = eval(U, NEURON_UNARY_BESSEL_Y1, xs);
	const auto k0 = eval(U, NEURON_UNARY_MODIFIED_BESSEL_K0, xs), k1 = eval(U, NEURON_UNARY_MODIFIED_BESSEL_K1, xs);
	const auto sk0 = eval(U, NEURON_UNARY_SCALED_MODIFIED_BESSEL_K0, xs);
	for (size_t i = 0; i < xs.size(); ++i) {
		const double x = xs[i];
		const double w1 = bessel_series(1, x, false) * y0[i] - bessel_series(0, x, false) * y1[i];
		cr_assert(std::fabs(w1 * x * 3.14159265358979 / 2 - 1) < 1e-4, "Y Wronskian at %g: %g", x, w1);
		const double w2 = bessel_series(0, x, true) * k1[i] + bessel_series(1, x, true) * k0[i];
		cr_assert(std::fabs(w2 * x - 1) < 1e-4, "K Wronskian at %g: %g", x, w2);
		cr_assert(std::fabs(sk0[i] - std::exp(x) * k0[i]) < 1e-4 * sk0[i], "scaled k0 at %g", x);
	}
	expect_values(eval(U, NEURON_UNARY_SPHERICAL_BESSEL_J0, xs), map([](double x) { return std::sin(x) / x; }), 1e-5,
		      "spherical j0");
	// Airy Ai by its Maclaurin series (|x| < 3 here).
	std::vector<double> ax;
	for (double x = -2.9; x < 2.9; x += 0.41)
		ax.push_back(x);
	std::vector<double> ai;
	for (double x : ax) {
		const double c1 = 0.355028053887817239, c2 = 0.258819403792806798;
		double f = 1, g = x, tf = 1, tg = x;
		for (int k = 1; k < 40; ++k) {
			tf *= x * x * x / ((3.0 * k - 1) * (3.0 * k));
			tg *= x * x * x / ((3.0 * k) * (3.0 * k + 1));
			f += tf;
			g += tg;
		}
		ai.push_back(c1 * f - c2 * g);
	}
	expect_values(eval(U, NEURON_UNARY_AIRY_AI, ax), ai, 1e-5, "airy ai");
	std::vector<double> zs;
	for (double x = -5; x < 5; x += 0.43)
		zs.push_back(x);
	auto zmap = [&](std::function<double(double)> f) {
		std::vector<double> r;
		for (double x : zs)
			r.push_back(f(x));
		return r;
	};
	expect_values(eval(U, NEURON_UNARY_NDTR, zs), zmap(ndtr_ref), 1e-6, "ndtr");
	expect_values(eval(U, NEURON_UNARY_LOG_NDTR, zs), zmap([](double x) { return std::log(ndtr_ref(x)); }), 1e-5, "log_ndtr");
	expect_values(eval(U, NEURON_UNARY_ERFCX, zs), zmap([](double x) { return std::exp(x * x) * std::erfc(x); }), 1e-5,
		      "erfcx");
	expect_values(eval(U, NEURON_UNARY_ENTR, {0.5, 0, -1, 2}), {0.5 * std::log(2.0), 0, -INFINITY, -2 * std::log(2.0)},
		      1e-6, "entr");
	std::vector<double> ps = {0.01, 0.2, 0.5, 0.77, 0.999, 0, 1};
	std::vector<double> q;
	for (double p : ps) { // invert ndtr by bisection
		double lo = -40, hi = 40;
		for (int i = 0; i < 200; ++i)
			(ndtr_ref((lo + hi) / 2) < p ? lo : hi) = (lo + hi) / 2;
		q.push_back(p == 0 ? -INFINITY : p == 1 ? INFINITY : (lo + hi) / 2);
	}
	expect_values(eval(U, NEURON_UNARY_NDTRI, ps), q, 1e-5, "ndtri");
	// polygamma n = 1, 2 as sums over k of n! (-1)^(n+1) / (x + k)^(n+1), with the integral tail
	std::vector<double> gx = {0.3, 1.0, 2.5, 7.0};
	for (int n : {1, 2}) {
		std::vector<double> want;
		for (double x : gx) {
			double s = 0;
			const int N = 200000;
			for (int k = 0; k < N; ++k)
				s += 1 / std::pow(x + k, n + 1);
			s += 1 / (n * std::pow(x + N, n)); // the tail
			want.push_back((n == 1 ? 1 : -2) * s);
		}
		expect_values(eval(U, NEURON_UNARY_POLYGAMMA, gx, {}, n), want, 1e-5, "polygamma");
	}
}

Test(isa14_special, binary_special_functions_and_polynomials)
{
	const int B = NEURON_OP_BINARY_MATH;
	expect_values(eval(B, NEURON_BINARY_XLOG1PY, {0, 2, -1.5}, {5, 0.5, 3}), {0, 2 * std::log(1.5), -1.5 * std::log(4.0)},
		      1e-6, "xlog1py");
	std::vector<double> zx = {2, 3, 4.5}, zq = {1, 0.5, 3};
	std::vector<double> zeta;
	for (size_t i = 0; i < zx.size(); ++i) {
		double s = 0;
		const int N = 200000;
		for (int k = 0; k < N; ++k)
			s += std::pow(zq[i] + k, -zx[i]);
		zeta.push_back(s + std::pow(zq[i] + N, 1 - zx[i]) / (zx[i] - 1));
	}
	expect_values(eval(B, NEURON_BINARY_ZETA, zx, zq), zeta, 1e-5, "zeta");
	// P(a, x) = x^a e^-x sum_k x^k / Gamma(a + k + 1); Q = 1 - P
	std::vector<double> ga = {0.5, 1, 3.2}, gx = {0.7, 2, 4};
	std::vector<double> p, qv;
	for (size_t i = 0; i < ga.size(); ++i) {
		double s = 0;
		for (int k = 0; k < 200; ++k)
			s += std::pow(gx[i], k) / std::tgamma(ga[i] + k + 1);
		p.push_back(std::pow(gx[i], ga[i]) * std::exp(-gx[i]) * s);
		qv.push_back(1 - p.back());
	}
	expect_values(eval(B, NEURON_BINARY_IGAMMA, ga, gx), p, 1e-5, "igamma");
	expect_values(eval(B, NEURON_BINARY_IGAMMAC, ga, gx), qv, 1e-5, "igammac");
	// Polynomials of degree 0..9 at points inside [-1, 1] against closed forms.
	std::vector<double> xs, ns;
	for (int n = 0; n <= 9; ++n)
		for (double x : {-0.9, -0.3, 0.25, 0.8}) {
			xs.push_back(x);
			ns.push_back(n);
		}
	auto closed = [&](std::function<double(double, int)> f) {
		std::vector<double> r;
		for (size_t i = 0; i < xs.size(); ++i)
			r.push_back(f(xs[i], int(ns[i])));
		return r;
	};
	expect_values(eval(B, NEURON_BINARY_CHEBYSHEV_T, xs, ns), closed([](double x, int n) { return std::cos(n * std::acos(x)); }),
		      1e-5, "chebyshev T");
	expect_values(eval(B, NEURON_BINARY_CHEBYSHEV_U, xs, ns), closed([](double x, int n) {
		const double t = std::acos(x);
		return std::sin((n + 1) * t) / std::sin(t);
	}), 1e-5, "chebyshev U");
	expect_values(eval(B, NEURON_BINARY_CHEBYSHEV_V, xs, ns), closed([](double x, int n) {
		const double t = std::acos(x);
		return std::cos((n + 0.5) * t) / std::cos(t / 2);
	}), 1e-5, "chebyshev V");
	expect_values(eval(B, NEURON_BINARY_CHEBYSHEV_W, xs, ns), closed([](double x, int n) {
		const double t = std::acos(x);
		return std::sin((n + 0.5) * t) / std::sin(t / 2);
	}), 1e-5, "chebyshev W");
	expect_values(eval(B, NEURON_BINARY_SHIFTED_CHEBYSHEV_T, xs, ns), closed([](double x, int n) {
		const double y = 2 * x - 1; // T_n(y), also outside [-1, 1]
		if (std::fabs(y) <= 1)
			return std::cos(n * std::acos(y));
		return (y < 0 && n % 2 ? -1 : 1) * std::cosh(n * std::acosh(std::fabs(y)));
	}), 1e-5, "shifted chebyshev T");
	auto legendre = [](double x, int n) { // Rodrigues' sum: 2^-n sum C(n,k)^2 (x-1)^(n-k) (x+1)^k
		double s = 0;
		for (int k = 0; k <= n; ++k) {
			const double c = std::tgamma(n + 1.0) / (std::tgamma(k + 1.0) * std::tgamma(n - k + 1.0));
			s += c * c * std::pow(x - 1, n - k) * std::pow(x + 1, k);
		}
		return s / std::pow(2.0, n);
	};
	expect_values(eval(B, NEURON_BINARY_LEGENDRE_P, xs, ns), closed(legendre), 1e-5, "legendre P");
	auto hermite_he = [](double x, int n) { // n! sum (-1)^m x^(n-2m) / (m! (n-2m)! 2^m)
		double s = 0;
		for (int m = 0; 2 * m <= n; ++m)
			s += (m % 2 ? -1 : 1) * std::pow(x, n - 2 * m) / (std::tgamma(m + 1.0) * std::tgamma(n - 2 * m + 1.0) * std::pow(2.0, m));
		return std::tgamma(n + 1.0) * s;
	};
	expect_values(eval(B, NEURON_BINARY_HERMITE_HE, xs, ns), closed(hermite_he), 1e-5, "hermite He");
	expect_values(eval(B, NEURON_BINARY_HERMITE_H, xs, ns), closed([&](double x, int n) {
		return std::pow(2.0, n / 2.0) * hermite_he(x * std::sqrt(2.0), n);
	}), 1e-4, "hermite H");
	expect_values(eval(B, NEURON_BINARY_LAGUERRE_L, xs, ns), closed([](double x, int n) { // sum C(n,k) (-x)^k / k!
		double s = 0;
		for (int k = 0; k <= n; ++k)
			s += std::tgamma(n + 1.0) / (std::tgamma(k + 1.0) * std::tgamma(n - k + 1.0)) * std::pow(-x, k) / std::tgamma(k + 1.0);
		return s;
	}), 1e-5, "laguerre L");
	expect_values(eval(B, NEURON_BINARY_CHEBYSHEV_T, {0.5, 1, -1}, {-1, 4, 3}), {0, 1, -1}, 0, "chebyshev edges");
}

// A polynomial's degree is work (one recurrence step each): past the device's limit
// the command faults, naming it, instead of holding the core (fuzz-command once
// timed out on a degree of ~1e18); a degree of -inf gives 0, as a negative one does.
Test(isa14_special, polynomial_degree_limit)
{
	const Tensor x = Tensor::make(NEURON_DTYPE_F32, {3}), n = Tensor::make(NEURON_DTYPE_F32, {3}),
		     out = Tensor::make(NEURON_DTYPE_F32, {3});
	const double xs[] = {0.3, 0.5, 0.7}, ns[] = {2, 1e18, 3};
	for (int64_t i = 0; i < 3; ++i) {
		x.set(&i, xs[i]);
		n.set(&i, ns[i]);
	}
	auto cmd = make_cmd(NEURON_OP_BINARY_MATH, {&out, &x, &n});
	cmd.iscalars[0] = NEURON_BINARY_LEGENDRE_P;
	cr_assert(!neuron::kernels::check_semantics(cmd));
	const auto e = neuron::kernels::execute(cmd, std::vector<View>{out.view(), x.view(), n.view()}, 2);
	cr_assert(e && e->message.find("limit of 1024") != std::string::npos, "a degree of 1e18 ran: %s",
		  e ? e->message.c_str() : "no fault");
	const double at_limit = 1024;
	const int64_t one = 1;
	n.set(&one, at_limit);
	run(cmd, {&out, &x, &n});
	const double minus_inf = -std::numeric_limits<double>::infinity();
	n.set(&one, minus_inf);
	run(cmd, {&out, &x, &n});
	cr_assert_eq(out.get(&one), 0.0, "P_{-inf}(0.5) = %g, want 0", out.get(&one));
}
