// The ISA 1.4 functions of UNARY_MATH and BINARY_MATH on one element, in double
// (special_math.cpp). f: the command's f[] scalars; i1: its i[1].
#pragma once

#include <neuron/cmd.h>

#include <cstdint>

namespace neuron::kernels::detail {

inline constexpr int kFirstSpecialUnary = NEURON_UNARY_SIN;
inline constexpr int kFirstSpecialBinary = NEURON_BINARY_ATAN2;

double unary_fn(int fn, double x, const double *f, int64_t i1);
double binary_fn(int fn, double a, double b, const double *f, int64_t i1);

// The orthogonal polynomials run their three-term recurrence once per degree, so a
// degree is work: above this one the command faults instead of running (a tenant's
// tensor of degrees 1e18 would hold the core for ever). torch.special computes
// them the same way on the CPU; degrees used in practice are far below this.
inline constexpr double kMaxPolynomialDegree = 1024;
inline bool is_polynomial(int fn) { return fn >= NEURON_BINARY_CHEBYSHEV_T && fn <= NEURON_BINARY_LEGENDRE_P; }

// torch.special's functions (special_functions.cpp), from NEURON_UNARY_BESSEL_J0
// and NEURON_BINARY_XLOG1PY on.
double special_unary(int fn, double x, const double *f);
double special_binary(int fn, double a, double b);

} // namespace neuron::kernels::detail
