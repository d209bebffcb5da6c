// One-command helpers: each encodes a chip command on the current stream of the
// output's device. Inputs are broadcast to the output's shape with stride 0; an
// input that partially overlaps the output is copied first (the chip only allows
// exact in-place views).
#pragma once

#include "encode.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_neuron {

using at::Tensor;
using c10::Scalar;

bool is_host_scalar(const Tensor &t);
bool same_view(const Tensor &a, const Tensor &b);
bool mem_overlap(const Tensor &a, const Tensor &b);
Tensor safe_input(const Tensor &in, const Tensor &out);
void set_scalar(neuron_cmd &cmd, const Tensor &out, const Scalar &s);
// out = a (op) s; reverse: s (op) a. op: ADD/SUB/MUL/DIV_SCALAR.
void scalar_op(int op, const Tensor &out, const Tensor &a, const Scalar &s, bool reverse = false);
void unary_op(int op, const Tensor &out, const Tensor &in, int64_t i0 = 0);
void binary_op(int op, const Tensor &out, const Tensor &a, const Tensor &b, double alpha = 1.0);
void fill_cmd(const Tensor &out, const Scalar &v);
bool float_dev(const Tensor &t);
Tensor float_out_like(const Tensor &self);
// An out= variant's tail: out takes r's shape (resized if it differs) and values.
Tensor &assign_out(Tensor &out, const Tensor &r);
c10::TensorOptions dev_opts(const Tensor &like, c10::ScalarType dt);
int64_t dim_mask(const Tensor &self, at::OptionalIntArrayRef dims);
std::vector<int64_t> keep_shape(const Tensor &self, int64_t mask);
std::vector<int64_t> drop_shape(const Tensor &self, int64_t mask);
void reduce_cmd(int op, const Tensor &out_keep, const Tensor &self, int64_t mask);
// out = f(in) by UNARY_MATH (fn: enum neuron_unary_fn; p0/p1/p2 = f[0..2], flags = i[1]).
void math_cmd(const Tensor &out, const Tensor &in, int fn, double p0 = 0, double p1 = 0, int64_t flags = 0,
	      double p2 = 0);
// out = f(a, b) by BINARY_MATH (fn: enum neuron_binary_fn; i1 = i[1], f0..f2 = f[0..2]);
// a and b broadcast to out's shape.
void bmath_cmd(const Tensor &out, const Tensor &a, const Tensor &b, int fn, int64_t i1 = 0, double f0 = 0, double f1 = 0,
	       double f2 = 0);
// One POINTWISE command (cmd.h): out = the last step of a chain over `inputs`
// (1..5, broadcast to out's shape) and up to 4 constants, computed in f32 per
// element with nothing stored between steps. A step's operands are value ids:
// pw_in(i), pw_step(s) (an earlier step's result), pw_const(c).
struct PwStep {
	uint8_t fn, a, b = 0; // fn: enum neuron_pw_fn
};
constexpr uint8_t pw_in(int i) { return static_cast<uint8_t>(i); }
constexpr uint8_t pw_step(int s) { return static_cast<uint8_t>(NEURON_PW_VALUE_STEP0 + s); }
constexpr uint8_t pw_const(int c) { return static_cast<uint8_t>(NEURON_PW_VALUE_CONST0 + c); }
void pointwise_cmd(const Tensor &out, const std::vector<Tensor> &inputs, const std::vector<PwStep> &steps,
		   const std::vector<double> &consts = {});
// A POINTWISE chain that feeds each step's value to the next: starts from an input,
// then combines the running value with another input or a constant, or applies a
// unary function; run() sends it as one command.
class PwChain {
public:
	explicit PwChain(const Tensor &first) : in_{first} {}
	PwChain &then(uint8_t fn, const Tensor &t); // value (fn) t
	PwChain &then_const(uint8_t fn, int c);     // value (fn) constant c
	PwChain &apply(uint8_t fn);                 // fn(value)
	void run(const Tensor &out, const std::vector<double> &consts = {}) const;

private:
	uint8_t value() const { return steps_.empty() ? pw_in(0) : pw_step(static_cast<int>(steps_.size()) - 1); }
	std::vector<Tensor> in_;
	std::vector<PwStep> steps_;
};
// out = cond ? a : b (cond bool; a, b of out's dtype), one WHERE command.
void where_cmd(const Tensor &out, const Tensor &cond, const Tensor &a, const Tensor &b);
// An index tensor the chip's indexing ops take (i32/i64 on the device).
bool index_ok(const Tensor &ix);
// out.scatter_add_(dim, index, src), one SCATTER_ADD command.
void scatter_add_cmd(const Tensor &out, int64_t dim, const Tensor &index, const Tensor &src);
// out = in.index_select(dim, ix) (ix 1-d i32/i64 on the device), one INDEX_SELECT.
void index_select_cmd(const Tensor &out, const Tensor &in, int64_t dim, const Tensor &ix);
// out.index_add_(dim, ix, src) / out.index_copy_(dim, ix, src): one INDEX_ADD / INDEX_COPY.
// One of the chip's indexed writes into out (operands out, index, src; dim i[0]):
// INDEX_ADD, INDEX_COPY, SCATTER_ADD or SCATTER. Nothing is sent for an empty write.
// reduce: INDEX_ADD / SCATTER_ADD's combining function (enum neuron_index_reduce).
void index_write_cmd(int op, const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src, int64_t reduce = 0);
void index_add_cmd(const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src);
void index_copy_cmd(const Tensor &out, int64_t dim, const Tensor &ix, const Tensor &src);
// out (bool) = a (cmp) v, one COMPARE_SCALAR.
void cmp_scalar_cmd(const Tensor &out, const Tensor &a, int fn, double v);
// nonzero of a device tensor on the device ([count, ndim] i64; the count is read
// to the host, the one sync a data-dependent shape needs). ops_index_reduce.cpp.
Tensor device_nonzero(const Tensor &self);
// t itself if on a neuron device, else a copy on like's device.
Tensor on_device(const Tensor &t, const Tensor &like);
// An optional tensor moved to the CPU (for host fallbacks).
std::optional<Tensor> cpu_opt(const std::optional<Tensor> &t);
// out = alpha a @ b + beta out (2-d, or 3-d batched), one MATMUL command (a fill or
// scale when K is 0).
void matmul_cmd(const Tensor &out, const Tensor &a, const Tensor &b, double alpha, double beta);
// out = alpha a @ b + beta bias (bias: out's shape, broadcast): one MATMUL_EPILOGUE
// (the COPY of the bias and the MATMUL with beta in one command, the same bits)
// for f32 with a bias apart from out, else COPY + matmul_cmd.
void bias_matmul_cmd(const Tensor &out, const Tensor &a, const Tensor &b, const Tensor &bias, double alpha, double beta);
// dst = cast(src) (broadcast), one COPY command.
void copy_cast_into(const Tensor &dst, const Tensor &src);

} // namespace torch_neuron
