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

// torch.special's functions (special_functions.cpp), from NEURON_UNARY_BESSEL_J0
// and NEURON_BINARY_XLOG1PY on.
double special_unary(int fn, double x, const double *f);
double special_binary(int fn, double a, double b);

} // namespace neuron::kernels::detail
