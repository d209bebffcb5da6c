// The vector/scalar engines' inner loops over one row of f32 operands (plain
// pointers: the engines point them into SBUF/PSUM in place when an operand is f32
// with a unit stride, else at a converted block). One loop per op and function,
// no per-element switch, compiled for AVX-512, AVX2 and baseline x86-64 (NK_HOT), so the
// compiler vectorises each; every result is the f32 arithmetic the unvectorised
// formula gives, bit for bit (reductions: see sum_row).
#pragma once

#include <cstddef>
#include <cstdint>

namespace neuron::tile::rows {

// o = fn(a * scale + (b ? b : 0) + bias), fn an enum neuron_pw_fn or 0 (none).
void activation(uint32_t fn, float *o, const float *a, const float *b, float scale, float bias, int64_t n);

// activation() whose results are also added to an 8-lane double sum: lanes[j] +=
// o[i] for i % 8 == j, a tail of n % 8 into lanes[0] (sum_row's order, so calls on
// consecutive pieces of a row whose lengths are multiples of 8 but the last give
// sum_row's bits over the whole row: lanes_total). ACTIVATION_REDUCE.
void activation_sum(uint32_t fn, float *o, const float *a, const float *b, float scale, float bias, int64_t n,
		    double *lanes);
double lanes_total(const double *lanes);

// out[f, p] = in[p, f] for p < P, f < F, 4-byte elements, rows `in_row` / `out_row`
// bytes apart (elements contiguous within a row; any alignment): 8 x 8 blocks
// through vector shuffles, the edges one element at a time. Exact (a move).
void transpose32(std::byte *out, int64_t out_row, const std::byte *in, int64_t in_row, int64_t P, int64_t F);

// o = (a <fn> b) ? 1 : 0, fn an enum neuron_cmp_fn; b == nullptr compares with `scalar`.
void compare(uint32_t fn, float *o, const float *a, const float *b, float scalar, int64_t n);

// o = c != 0 ? a : b; b == nullptr selects `scalar`.
void select(float *o, const float *c, const float *a, const float *b, float scalar, int64_t n);

// o = fn(a, s) (or fn(s, a) when reverse): tensor_scalar's binary functions.
void tensor_scalar(uint32_t fn, float *o, const float *a, float s, bool reverse, int64_t n);

// o = base + step * e for e < n, rounded to f32 once (as from the exact integer).
void iota(float *o, int64_t base, int64_t step, int64_t n);

// The sum of x[0..n) in double (a few independent lanes, so the order differs from
// a left-to-right sum only below f32's precision: the engine rounds it to f32 once).
double sum_row(const float *x, int64_t n);

// max (or min) of x[0..n); NaN if any element is NaN. Exact in any order.
float extreme_row(const float *x, int64_t n, bool max);

} // namespace neuron::tile::rows
