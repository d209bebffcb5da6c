// ISA 1.4 functions of UNARY_MATH and BINARY_MATH (trigonometry, rounding, special
// functions, activations and their backwards), one element at a time in double.
//
// These are PyTorch's definitions (aten/src/ATen/native/Math.h and the activation
// kernels), so a plugin built on them matches eager PyTorch; double keeps the f32
// results correctly rounded where libm is. The ISA 1.1 functions stay in math.cpp,
// whose hot loops run in float.
#include "special_math.h"

#include <cmath>
#include <limits>

namespace neuron::kernels::detail {

namespace {

constexpr double kPi = 3.14159265358979323846;

// ψ(x), as PyTorch's calc_digamma: reflection below 0, recurrence to x >= 10, then
// the asymptotic series.
double digamma(double x)
{
	if (x == 0)
		return std::copysign(std::numeric_limits<double>::infinity(), -x);
	if (x < 0) {
		if (x == std::trunc(x))
			return std::numeric_limits<double>::quiet_NaN();
		double whole;
		const double frac = std::modf(x, &whole); // tan(pi * frac) is exact where tan(pi * x) is not
		return digamma(1 - x) - kPi / std::tan(kPi * frac);
	}
	double result = 0;
	while (x < 10) {
		result -= 1 / x;
		x += 1;
	}
	if (x == 10)
		return result + 2.25175258906672110764;
	static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
				   -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
				   8.33333333333333333333E-2};
	double y = 0;
	if (x < 1.0e17) {
		const double z = 1 / (x * x);
		double p = 0;
		for (double a : A)
			p = p * z + a;
		y = z * p;
	}
	return result + std::log(x) - 0.5 / x - y;
}

// erf^-1, as PyTorch's calc_erfinv: a rational first guess refined by two Newton steps.
double erfinv(double y)
{
	if (y <= -1 || y >= 1) {
		if (y == -1 || y == 1)
			return std::copysign(std::numeric_limits<double>::infinity(), y);
		return std::numeric_limits<double>::quiet_NaN();
	}
	static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
	static const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
	static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
	static const double d[2] = {3.543889200, 1.637067800};
	const double y_abs = std::fabs(y);
	double x;
	if (y_abs <= 0.7) {
		const double z = y * y;
		const double num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
		const double dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
		x = y * num / dem;
	} else {
		const double z = std::sqrt(-std::log((1.0 - y_abs) / 2.0));
		const double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
		const double dem = (d[1] * z + d[0]) * z + 1.0;
		x = std::copysign(num, y) / dem;
	}
	const double two_over_sqrt_pi = 1.12837916709551257390;
	for (int i = 0; i < 2; ++i)
		x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
	return x;
}

// Modified Bessel function of the first kind, order 0 (Cephes' Chebyshev form, as
// PyTorch's calc_i0).
double chbevl(double x, const double *coef, int n)
{
	double b0 = coef[0], b1 = 0, b2 = 0;
	for (int i = 1; i < n; ++i) {
		b2 = b1;
		b1 = b0;
		b0 = x * b1 - b2 + coef[i];
	}
	return 0.5 * (b0 - b2);
}

double bessel_i0(double x)
{
	static const double A[] = {
		-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
		1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
		-4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
		9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
		-1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
		1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
		-5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
		1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
		-2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
		1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1};
	static const double B[] = {
		-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
		3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
		1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
		-4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
		7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
		-3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
		3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
		2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
		8.04490411014108831608E-1};
	x = std::fabs(x);
	if (x <= 8.0)
		return std::exp(x) * chbevl(x / 2.0 - 2.0, A, 30);
	return std::exp(x) * chbevl(32.0 / x - 2.0, B, 25) / std::sqrt(x);
}

double lgamma_r(double x)
{
	int sign;
	return ::lgamma_r(x, &sign);
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

double softplus(double x, double beta, double threshold)
{
	return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

double round_half_even(double x) { return std::nearbyint(x); }

} // namespace

double unary_fn(int fn, double x, const double *f, int64_t i1)
{
	switch (fn) {
	case NEURON_UNARY_SIN: return std::sin(x);
	case NEURON_UNARY_COS: return std::cos(x);
	case NEURON_UNARY_TAN: return std::tan(x);
	case NEURON_UNARY_ASIN: return std::asin(x);
	case NEURON_UNARY_ACOS: return std::acos(x);
	case NEURON_UNARY_ATAN: return std::atan(x);
	case NEURON_UNARY_SINH: return std::sinh(x);
	case NEURON_UNARY_COSH: return std::cosh(x);
	case NEURON_UNARY_ASINH: return std::asinh(x);
	case NEURON_UNARY_ACOSH: return std::acosh(x);
	case NEURON_UNARY_ATANH: return std::atanh(x);
	case NEURON_UNARY_LOG1P: return std::log1p(x);
	case NEURON_UNARY_EXPM1: return std::expm1(x);
	case NEURON_UNARY_LOG2: return std::log2(x);
	case NEURON_UNARY_LOG10: return std::log10(x);
	case NEURON_UNARY_EXP2: return std::exp2(x);
	case NEURON_UNARY_FLOOR: return std::floor(x);
	case NEURON_UNARY_CEIL: return std::ceil(x);
	case NEURON_UNARY_ROUND: return round_half_even(x);
	case NEURON_UNARY_TRUNC: return std::trunc(x);
	case NEURON_UNARY_FRAC: return x - std::trunc(x);
	case NEURON_UNARY_SIGN: return static_cast<double>((x > 0) - (x < 0)); // NaN and -0 give 0, as torch.sign
	case NEURON_UNARY_LGAMMA: return lgamma_r(x);
	case NEURON_UNARY_DIGAMMA: return digamma(x);
	case NEURON_UNARY_ERFC: return std::erfc(x);
	case NEURON_UNARY_ERFINV: return erfinv(x);
	case NEURON_UNARY_LEAKY_RELU: return x > 0 ? x : x * f[0];
	case NEURON_UNARY_SOFTPLUS: return softplus(x, f[0], f[1]);
	case NEURON_UNARY_ELU: return x > 0 ? f[1] * x : f[1] * f[0] * std::expm1(x * f[2]);
	case NEURON_UNARY_HARDSIGMOID: return std::min(std::max(x + 3, 0.0), 6.0) / 6;
	case NEURON_UNARY_HARDSWISH: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
	case NEURON_UNARY_MISH: return x * std::tanh(std::log1p(std::exp(x)));
	case NEURON_UNARY_LOGIT: {
		if (i1 == 1)
			x = x < f[0] ? f[0] : (x > 1 - f[0] ? 1 - f[0] : x);
		return std::log(x / (1 - x));
	}
	case NEURON_UNARY_I0: return bessel_i0(x);
	case NEURON_UNARY_ROUND_DECIMALS:
		return i1 == 1 ? round_half_even(x / f[0]) * f[0] : round_half_even(x * f[0]) / f[0];
	case NEURON_UNARY_SINC: {
		if (x == 0)
			return 1;
		const double px = kPi * x;
		return std::sin(px) / px;
	}
	default: return special_unary(fn, x, f);
	}
}

namespace {

double fmod_(double a, double b) { return std::fmod(a, b); }

double remainder_(double a, double b)
{
	// Python's %: the result takes the divisor's sign.
	double r = std::fmod(a, b);
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}

double floor_divide(double a, double b)
{
	// As PyTorch's div_floor_floating: floor of the true quotient, computed from fmod
	// so that it stays exact where a / b would round.
	if (b == 0)
		return a / b;
	const double mod = std::fmod(a, b);
	double div = (a - mod) / b;
	if (mod != 0 && ((b < 0) != (mod < 0)))
		div -= 1;
	if (div == 0)
		return std::copysign(0.0, a / b);
	const double floordiv = std::floor(div);
	return div - floordiv > 0.5 ? floordiv + 1 : floordiv;
}

double logaddexp(double a, double b)
{
	if (std::isinf(a) && a == b)
		return a;
	const double m = std::max(a, b);
	return m + std::log1p(std::exp(-std::fabs(a - b)));
}

double logaddexp2(double a, double b)
{
	if (std::isinf(a) && a == b)
		return a;
	const double m = std::max(a, b);
	return m + std::log1p(std::exp2(-std::fabs(a - b))) / std::log(2.0);
}

double xlogy(double x, double y)
{
	if (y != y)
		return y;
	if (x == 0)
		return 0;
	return x * std::log(y);
}

double elu_backward(double g, double x, const double *f, bool is_result)
{
	const double alpha = f[0], scale = f[1], input_scale = f[2];
	if (is_result)
		return x <= 0 ? g * input_scale * (x + alpha * scale) : g * scale;
	return x <= 0 ? g * input_scale * alpha * scale * std::exp(x * input_scale) : g * scale;
}

double mish_backward(double g, double x)
{
	const double sp = std::log1p(std::exp(x));
	const double t = std::tanh(sp);
	return g * (t + x * sigmoid(x) * (1 - t * t));
}

} // namespace

double binary_fn(int fn, double a, double b, const double *f, int64_t i1)
{
	switch (fn) {
	case NEURON_BINARY_ATAN2: return std::atan2(a, b);
	case NEURON_BINARY_FMOD: return fmod_(a, b);
	case NEURON_BINARY_REMAINDER: return remainder_(a, b);
	case NEURON_BINARY_HYPOT: return std::hypot(a, b);
	case NEURON_BINARY_COPYSIGN: return std::copysign(a, b);
	case NEURON_BINARY_LOGADDEXP: return logaddexp(a, b);
	case NEURON_BINARY_XLOGY: return xlogy(a, b);
	case NEURON_BINARY_NEXTAFTER: return std::nextafter(static_cast<float>(a), static_cast<float>(b));
	case NEURON_BINARY_FLOOR_DIVIDE: return floor_divide(a, b);
	case NEURON_BINARY_LOGADDEXP2: return logaddexp2(a, b);
	case NEURON_BINARY_LEAKY_RELU_BACKWARD: return b > 0 ? a : a * f[0];
	case NEURON_BINARY_SOFTPLUS_BACKWARD: {
		const double z = std::exp(b * f[0]);
		return b * f[0] > f[1] ? a : a * z / (z + 1);
	}
	case NEURON_BINARY_ELU_BACKWARD: return elu_backward(a, b, f, i1 == 1);
	case NEURON_BINARY_HARDTANH_BACKWARD: return (b <= f[0] || b >= f[1]) ? 0 : a;
	case NEURON_BINARY_HARDSIGMOID_BACKWARD: return (b > -3 && b < 3) ? a / 6 : 0;
	case NEURON_BINARY_HARDSWISH_BACKWARD:
		return b < -3 ? 0 : (b <= 3 ? a * (b / 3 + 0.5) : a);
	case NEURON_BINARY_MISH_BACKWARD: return mish_backward(a, b);
	case NEURON_BINARY_LOGIT_BACKWARD:
		if (i1 == 1 ? (b < f[0] || b > 1 - f[0]) : false)
			return 0;
		if (i1 != 1 && (b < 0 || b > 1))
			return std::numeric_limits<double>::quiet_NaN();
		return a / (b * (1 - b));
	default: return special_binary(fn, a, b);
	}
}

} // namespace neuron::kernels::detail
