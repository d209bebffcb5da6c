// ISA 1.8 LAYER_NORM and LAYER_NORM_BACKWARD against the layer norm computed here
// in double, row by row from its definition (mean, biased variance, eps), over
// the kernel's paths: f32 rows read and written in place, bf16 and strided rows
// through its buffers, rows along a middle dim, with and without weight and bias,
// rows shorter and longer than a vector, a constant row (variance 0); the affine
// parameters' gradients (sums over rows, accumulated or not). Then the contract's
// refusals.
#include "ref.h"

#include <cmath>

using namespace ref;
using neuron::kernels::check_semantics;

namespace {

// The statistics of the row through idx along D, from the input's own values.
struct RowStats {
	double mean, rstd;
};

RowStats row_stats(const Tensor &x, const int64_t *idx, int D, double eps)
{
	int64_t i[NEURON_MAX_DIMS];
	std::copy(idx, idx + x.ndim, i);
	const int64_t n = x.sizes[D];
	double s = 0, q = 0;
	for (i[D] = 0; i[D] < n; ++i[D])
		s += x.get(i);
	const double m = s / static_cast<double>(n);
	for (i[D] = 0; i[D] < n; ++i[D])
		q += (x.get(i) - m) * (x.get(i) - m);
	return {m, 1.0 / std::sqrt(q / static_cast<double>(n) + eps)};
}

// Statistics shape: x's with size 1 at D.
std::vector<int64_t> stats_shape(const Tensor &x, int D)
{
	std::vector<int64_t> s = x.shape();
	s[static_cast<size_t>(D)] = 1;
	return s;
}

double param(const Tensor *p, const int64_t *idx, int D, double none)
{
	if (!p)
		return none;
	const int64_t j[1] = {idx[D]};
	return p->get(j);
}

// Runs LAYER_NORM on x (rows along D) and checks out, mean and rstd.
void check_forward(const Tensor &x, int D, const Tensor *w, const Tensor *b, double eps, const std::string &what)
{
	const Tensor out = Tensor::make(x.dt, x.shape());
	const Tensor mean = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
	const Tensor rstd = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
	std::vector<const Tensor *> ops = {&out, &mean, &rstd, &x};
	if (w)
		ops.push_back(w);
	if (b)
		ops.push_back(b);
	neuron_cmd cmd = make_cmd(NEURON_OP_LAYER_NORM, ops);
	cmd.iscalars[0] = D;
	cmd.fscalars.f[0] = eps;
	run(cmd, ops);
	const Tol tol = x.dt == NEURON_DTYPE_F32 ? Tol{1e-5, 1e-5} : tol_for(x.dt);
	expect_tensor(
		out,
		[&](const int64_t *i) {
			const RowStats st = row_stats(x, i, D, eps);
			return (x.get(i) - st.mean) * st.rstd * param(w, i, D, 1) + param(b, i, D, 0);
		},
		tol, what + " out");
	expect_tensor(mean, [&](const int64_t *i) { return row_stats(x, i, D, eps).mean; }, {1e-6, 1e-6}, what + " mean");
	expect_tensor(rstd, [&](const int64_t *i) { return row_stats(x, i, D, eps).rstd; }, {1e-6, 1e-6}, what + " rstd");
}

// Runs LAYER_NORM_BACKWARD with the statistics of x and checks dx.
void check_backward(const Tensor &go, const Tensor &x, int D, const Tensor *w, const std::string &what)
{
	const double eps = 1e-5;
	const Tensor mean = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
	const Tensor rstd = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
	mean.each([&](const int64_t *i) {
		const RowStats st = row_stats(x, i, D, eps);
		mean.set(i, st.mean);
		rstd.set(i, st.rstd);
	});
	const Tensor dx = Tensor::make(x.dt, x.shape());
	std::vector<const Tensor *> ops = {&dx, &go, &x, &mean, &rstd};
	if (w)
		ops.push_back(w);
	neuron_cmd cmd = make_cmd(NEURON_OP_LAYER_NORM_BACKWARD, ops);
	cmd.iscalars[0] = D;
	run(cmd, ops);
	const Tol tol = x.dt == NEURON_DTYPE_F32 ? Tol{1e-4, 1e-4} : tol_for(x.dt);
	expect_tensor(
		dx,
		[&](const int64_t *idx) {
			// The row's sums of g and g * xhat with the statistics the command got.
			int64_t i[NEURON_MAX_DIMS];
			std::copy(idx, idx + x.ndim, i);
			const int64_t n = x.sizes[D];
			i[D] = 0; // the statistics' index: size 1 along D
			const double m = mean.get(i), r = rstd.get(i);
			auto g = [&](const int64_t *j) { return go.get(j) * param(w, j, D, 1); };
			double s1 = 0, s2 = 0;
			for (i[D] = 0; i[D] < n; ++i[D]) {
				s1 += g(i);
				s2 += g(i) * (x.get(i) - m) * r;
			}
			const double xh = (x.get(idx) - m) * r;
			return (g(idx) - s1 / n - xh * s2 / n) * r;
		},
		tol, what + " dx");
}

} // namespace

Test(isa18_layer_norm, rows_of_every_length_with_and_without_affine)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16})
		for (int64_t C : {1, 7, 64, 700})
			for (int affine = 0; affine < 3; ++affine) {
				const Tensor x = Tensor::make(dt, {9, C});
				x.randomize(1, -3, 3);
				const Tensor w = Tensor::make(affine == 2 ? NEURON_DTYPE_BF16 : dt, {C});
				const Tensor b = Tensor::make(dt, {C});
				w.randomize(2, -2, 2);
				b.randomize(3, -2, 2);
				const std::string what = std::string(dname(dt)) + " [9, " + std::to_string(C) + "] affine " +
							 std::to_string(affine);
				check_forward(x, 1, affine ? &w : nullptr, affine == 2 ? &b : nullptr, 1e-5, what);
				const Tensor go = Tensor::make(dt, {9, C});
				go.randomize(4, -2, 2);
				check_backward(go, x, 1, affine ? &w : nullptr, what);
			}
}

Test(isa18_layer_norm, strided_rows_middle_dims_and_eps)
{
	// Rows with a stride (the transpose of a contiguous [C, R]), rows along the
	// middle dim of [4, 33, 5], a large eps.
	const Tensor xt = Tensor::make(NEURON_DTYPE_F32, {40, 6});
	xt.randomize(5, -4, 4);
	const Tensor x = xt.transpose(0, 1); // [6, 40], rows of 40 with stride 6
	const Tensor w = Tensor::make(NEURON_DTYPE_F32, {40});
	w.randomize(6, -1, 1);
	check_forward(x, 1, &w, nullptr, 1e-5, "strided rows");
	check_forward(x, 1, nullptr, nullptr, 0.5, "eps 0.5");
	const Tensor got = Tensor::make(NEURON_DTYPE_F32, {40, 6});
	got.randomize(7, -1, 1);
	check_backward(got.transpose(0, 1), x, 1, &w, "strided rows");
	const Tensor x3 = Tensor::make(NEURON_DTYPE_BF16, {4, 33, 5});
	x3.randomize(8, -2, 2);
	const Tensor w3 = Tensor::make(NEURON_DTYPE_F32, {33});
	w3.randomize(9, -1, 1);
	check_forward(x3, 1, &w3, &w3, 1e-5, "middle dim");
	const Tensor go3 = Tensor::make(NEURON_DTYPE_BF16, {4, 33, 5});
	go3.randomize(10, -1, 1);
	check_backward(go3, x3, 1, &w3, "middle dim");
}

Test(isa18_layer_norm, constant_row_is_its_bias)
{
	// Variance 0: rstd = 1 / sqrt(eps) and every normalized element is 0, so out = bias.
	const Tensor x = Tensor::make(NEURON_DTYPE_F32, {3, 16});
	x.each([&](const int64_t *i) { x.set(i, 2.5); });
	const Tensor b = Tensor::make(NEURON_DTYPE_F32, {16});
	b.randomize(11, -1, 1);
	check_forward(x, 1, &b, &b, 1e-5, "constant rows");
}

Test(isa18_layer_norm, parameter_gradients_sum_over_rows)
{
	// dw = sum over rows of go * xhat, db = sum of go; rows along the last dim of
	// [5, 7, C] and along the middle dim of a bf16 [6, C, 3]; dw strided; with
	// NEURON_LN_ACCUMULATE the sums are added to what dw and db hold.
	for (int64_t C : {1, 33, 64}) {
		for (int layout = 0; layout < 2; ++layout) {
			const int dt = layout ? NEURON_DTYPE_BF16 : NEURON_DTYPE_F32;
			const int D = layout ? 1 : 2;
			const Tensor x = Tensor::make(dt, layout ? std::vector<int64_t>{6, C, 3} : std::vector<int64_t>{5, 7, C});
			const Tensor go = Tensor::make(dt, x.shape());
			x.randomize(20, -3, 3);
			go.randomize(21, -2, 2);
			const Tensor mean = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
			const Tensor rstd = Tensor::make(NEURON_DTYPE_F32, stats_shape(x, D));
			mean.each([&](const int64_t *i) {
				const RowStats st = row_stats(x, i, D, 1e-5);
				mean.set(i, st.mean);
				rstd.set(i, st.rstd);
			});
			const Tensor db = Tensor::make(NEURON_DTYPE_F32, {C});
			Tensor dw1 = Tensor::make(NEURON_DTYPE_F32, {C, 2}).slice(1, 0, 1, 1);
			dw1.ndim = 1; // [C] with stride 2
			for (bool acc : {false, true}) {
				dw1.each([&](const int64_t *i) { dw1.set(i, 0.5); });
				db.each([&](const int64_t *i) { db.set(i, -0.25); });
				neuron_cmd cmd = make_cmd(NEURON_OP_LAYER_NORM_PARAM_GRAD, {&dw1, &db, &go, &x, &mean, &rstd});
				cmd.iscalars[0] = D;
				cmd.iscalars[1] = acc ? NEURON_LN_ACCUMULATE : 0;
				run(cmd, {&dw1, &db, &go, &x, &mean, &rstd});
				auto sum = [&](const int64_t *j, bool weight) {
					double t = 0;
					x.each([&](const int64_t *i) {
						if (i[D] != j[0])
							return;
						int64_t si[NEURON_MAX_DIMS];
						std::copy(i, i + x.ndim, si);
						si[D] = 0;
						const float xh = static_cast<float>((static_cast<float>(x.get(i)) -
										     static_cast<float>(mean.get(si))) *
										    static_cast<float>(rstd.get(si)));
						t += weight ? static_cast<double>(static_cast<float>(go.get(i)) * xh) : go.get(i);
					});
					return t;
				};
				const std::string what = std::string(dname(dt)) + " C=" + std::to_string(C) + (acc ? " accumulate" : "");
				expect_tensor(dw1, [&](const int64_t *j) { return sum(j, true) + (acc ? 0.5 : 0); }, {1e-6, 1e-5},
					      what + " dw");
				expect_tensor(db, [&](const int64_t *j) { return sum(j, false) + (acc ? -0.25 : 0); }, {1e-6, 1e-5},
					      what + " db");
			}
		}
	}
}

namespace {

neuron_cmd ln_cmd(bool backward)
{
	const std::vector<int64_t> rows = {4, 8}, stats = {4, 1}, param = {8};
	std::vector<Tensor> t;
	if (backward)
		t = {Tensor::make(NEURON_DTYPE_F32, rows), Tensor::make(NEURON_DTYPE_F32, rows),
		     Tensor::make(NEURON_DTYPE_F32, rows), Tensor::make(NEURON_DTYPE_F32, stats),
		     Tensor::make(NEURON_DTYPE_F32, stats), Tensor::make(NEURON_DTYPE_F32, param)};
	else
		t = {Tensor::make(NEURON_DTYPE_F32, rows), Tensor::make(NEURON_DTYPE_F32, stats),
		     Tensor::make(NEURON_DTYPE_F32, stats), Tensor::make(NEURON_DTYPE_F32, rows),
		     Tensor::make(NEURON_DTYPE_F32, param), Tensor::make(NEURON_DTYPE_F32, param)};
	neuron_cmd c = make_cmd(backward ? NEURON_OP_LAYER_NORM_BACKWARD : NEURON_OP_LAYER_NORM,
				{&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]});
	c.iscalars[0] = 1;
	if (!backward)
		c.fscalars.f[0] = 1e-5;
	return c;
}

void refused(const neuron_cmd &c, const char *needle, const char *what)
{
	const auto f = check_semantics(c);
	cr_assert(f, "%s: accepted", what);
	cr_assert_eq(f->code, NEURON_FAULT_BAD_OPERAND, "%s: fault %u (%s)", what, f->code, f->message.c_str());
	cr_assert(f->message.find(needle) != std::string::npos, "%s: \"%s\" lacks \"%s\"", what, f->message.c_str(),
		  needle);
}

} // namespace

Test(isa18_layer_norm, contract_refusals)
{
	for (bool bw : {false, true}) {
		const neuron_cmd good = ln_cmd(bw);
		cr_assert(!check_semantics(good), "valid %s refused: %s", bw ? "backward" : "forward",
			  check_semantics(good)->message.c_str());
		neuron_cmd c = good;
		c.num_operands = bw ? 4 : 3;
		std::memset(&c.operands[c.num_operands], 0, sizeof(c.operands[0]) * (6 - c.num_operands));
		refused(c, bw ? "takes 5 to 6" : "takes 4 to 6", "too few operands");
		c = good;
		c.iscalars[0] = 2;
		refused(c, "(dim) must be in [0, 2)", "dim past the rank");
		const int stat = bw ? 3 : 1;
		c = good;
		c.operands[stat].dtype = NEURON_DTYPE_BF16;
		refused(c, "the row statistics are f32", "bf16 mean");
		c = good;
		c.operands[stat + 1].sizes[1] = 8;
		refused(c, "1 along the normalized dim", "rstd of the rows' shape");
		c = good;
		c.operands[5].sizes[0] = 7;
		c.operands[5].strides[0] = 1;
		refused(c, "1-D of the row's length 8", "short weight");
		c = good;
		c.operands[bw ? 2 : 3].dtype = NEURON_DTYPE_BF16;
		refused(c, "does not match out dtype", "in of another dtype");
		c = good;
		c.operands[0].dtype = NEURON_DTYPE_I32;
		refused(c, "f32, bf16 or f16", "integer out");
		c = good;
		c.fscalars.f[1] = 1;
		refused(c, "unused by", "a scalar it does not read");
	}
	// The parameter gradients: f32 1-D sums of the row's length, known flags only.
	const std::vector<int64_t> rows = {4, 8}, stats = {4, 1};
	const Tensor dw = Tensor::make(NEURON_DTYPE_F32, {8}), db = Tensor::make(NEURON_DTYPE_F32, {8});
	const Tensor go = Tensor::make(NEURON_DTYPE_F32, rows), x = Tensor::make(NEURON_DTYPE_F32, rows);
	const Tensor m = Tensor::make(NEURON_DTYPE_F32, stats), r = Tensor::make(NEURON_DTYPE_F32, stats);
	neuron_cmd pg = make_cmd(NEURON_OP_LAYER_NORM_PARAM_GRAD, {&dw, &db, &go, &x, &m, &r});
	pg.iscalars[0] = 1;
	cr_assert(!check_semantics(pg), "valid param grad refused: %s", check_semantics(pg)->message.c_str());
	neuron_cmd c = pg;
	c.operands[0].dtype = NEURON_DTYPE_BF16;
	refused(c, "the parameter gradients are f32", "bf16 dw");
	c = pg;
	c.operands[1].sizes[0] = 4;
	refused(c, "1-D of the row's length 8", "db of the wrong length");
	c = pg;
	c.iscalars[1] = 2;
	refused(c, "unknown flags", "unknown flag");
	c = pg;
	c.operands[2].sizes[0] = 3;
	refused(c, "does not match in sizes[0]", "go of another shape");
	c = pg;
	c.operands[4].sizes[1] = 8;
	refused(c, "1 along the normalized dim", "mean of the rows' shape");
	c = ln_cmd(false);
	for (double eps : {-1.0, double(NAN), double(INFINITY)}) {
		c.fscalars.f[0] = eps;
		refused(c, "(eps) must be finite and >= 0", "bad eps");
	}
}
