// ISA 1.3 INDEX_COPY and SCATTER (the copying forms of INDEX_ADD / SCATTER_ADD)
// against direct references: both dims, transposed operands, i32 and i64 indices,
// float, integer and bool data, duplicate indices (the last one wins), a 0-d
// operand; out-of-range indices fault before anything is written; the rejections.
#include "ref.h"

using namespace ref;

namespace {

void set_index(const Tensor &ix, const std::vector<int64_t> &vals)
{
	for (int64_t j = 0; j < static_cast<int64_t>(vals.size()); ++j)
		ix.set(&j, static_cast<double>(vals[static_cast<size_t>(j)]));
}

} // namespace

Test(index_copy, rows_and_columns_last_duplicate_wins)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_I64, NEURON_DTYPE_BOOL}) {
		// dim 0 with a duplicate (row 3 written by j = 0 and j = 3: j = 3 wins)
		const Tensor out = Tensor::make(dt, {6, 4});
		out.randomize(31, 0, 2);
		const Tensor before = out.clone();
		const Tensor src = Tensor::make(dt, {5, 4});
		src.randomize(32, 0, 2);
		const std::vector<int64_t> vals{3, 0, 5, 3, 1};
		const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {5});
		set_index(ix, vals);
		auto cmd = make_cmd(NEURON_OP_INDEX_COPY, {&out, &ix, &src});
		cr_assert(!neuron::kernels::check_semantics(cmd));
		run(cmd, {&out, &ix, &src});
		expect_tensor(
			out,
			[&](const int64_t *i) {
				double v = before.get(i);
				for (int64_t j = 0; j < 5; ++j)
					if (vals[static_cast<size_t>(j)] == i[0]) {
						int64_t p[2] = {j, i[1]};
						v = src.get(p);
					}
				return v;
			},
			Tol{0, 0}, "index_copy dim 0");
		// dim 1 on a transposed output with an i32 index
		const Tensor out2 = Tensor::make(dt, {5, 3}).transpose(0, 1);
		out2.randomize(33, 0, 2);
		const Tensor before2 = out2.clone();
		const Tensor src2 = Tensor::make(dt, {3, 2});
		src2.randomize(34, 0, 2);
		const Tensor ix2 = Tensor::make(NEURON_DTYPE_I32, {2});
		set_index(ix2, {4, 1});
		auto c2 = make_cmd(NEURON_OP_INDEX_COPY, {&out2, &ix2, &src2});
		c2.iscalars[0] = 1;
		run(c2, {&out2, &ix2, &src2});
		expect_tensor(
			out2,
			[&](const int64_t *i) {
				int64_t p[2] = {i[0], i[1] == 4 ? 0 : 1};
				return i[1] == 4 || i[1] == 1 ? src2.get(p) : before2.get(i);
			},
			Tol{0, 0}, "index_copy dim 1");
	}
}

Test(index_copy, scatter_along_each_dim)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_I32, NEURON_DTYPE_BOOL}) {
		const Tensor out = Tensor::make(dt, {4, 10});
		out.randomize(41, 0, 2);
		const Tensor before = out.clone();
		const Tensor src = Tensor::make(dt, {4, 2});
		src.randomize(42, 0, 2);
		const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {4, 2});
		const int64_t t[4][2] = {{9, 0}, {3, 3}, {1, 2}, {5, 5}}; // rows 1 and 3: duplicates
		for (int64_t r = 0; r < 4; ++r)
			for (int64_t c = 0; c < 2; ++c) {
				int64_t p[2] = {r, c};
				ix.set(p, static_cast<double>(t[r][c]));
			}
		auto cmd = make_cmd(NEURON_OP_SCATTER, {&out, &ix, &src});
		cmd.iscalars[0] = 1;
		cr_assert(!neuron::kernels::check_semantics(cmd));
		run(cmd, {&out, &ix, &src});
		expect_tensor(
			out,
			[&](const int64_t *i) {
				double v = before.get(i);
				for (int64_t c = 0; c < 2; ++c)
					if (t[i[0]][c] == i[1]) {
						int64_t p[2] = {i[0], c};
						v = src.get(p);
					}
				return v;
			},
			Tol{0, 0}, "scatter dim 1");
		// dim 0 into a transposed output
		const Tensor o2 = Tensor::make(dt, {3, 5}).transpose(0, 1);
		o2.randomize(43, 0, 2);
		const Tensor b2 = o2.clone();
		const Tensor s2 = Tensor::make(dt, {1, 3});
		s2.randomize(44, 0, 2);
		const Tensor i2 = Tensor::make(NEURON_DTYPE_I32, {1, 3});
		for (int64_t c = 0; c < 3; ++c) {
			int64_t p[2] = {0, c};
			i2.set(p, static_cast<double>(4 - c));
		}
		auto c2 = make_cmd(NEURON_OP_SCATTER, {&o2, &i2, &s2});
		run(c2, {&o2, &i2, &s2});
		expect_tensor(
			o2,
			[&](const int64_t *i) {
				int64_t p[2] = {0, i[1]};
				return i[0] == 4 - i[1] ? s2.get(p) : b2.get(i);
			},
			Tol{0, 0}, "scatter dim 0");
	}
}

Test(index_copy, zero_dim_operands)
{
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {}), src = Tensor::make(NEURON_DTYPE_F32, {});
	src.randomize(51);
	const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {1});
	set_index(ix, {0});
	auto cmd = make_cmd(NEURON_OP_INDEX_COPY, {&out, &ix, &src});
	run(cmd, {&out, &ix, &src});
	expect_tensor(out, [&](const int64_t *i) { return src.get(i); }, Tol{0, 0}, "0-d index_copy");
}

Test(index_copy, out_of_range_faults_before_writing)
{
	const Tensor out = Tensor::make(NEURON_DTYPE_F32, {3, 2});
	out.randomize(61);
	const Tensor before = out.clone();
	const Tensor src = Tensor::make(NEURON_DTYPE_F32, {2, 2});
	src.randomize(62);
	const Tensor ix = Tensor::make(NEURON_DTYPE_I64, {2});
	set_index(ix, {0, 3}); // the first is valid, the second one past the end
	auto cmd = make_cmd(NEURON_OP_INDEX_COPY, {&out, &ix, &src});
	std::vector<View> views{out.view(), ix.view(), src.view()};
	const auto f = neuron::kernels::execute(cmd, views, 1);
	cr_assert(f && f->code == NEURON_FAULT_EXEC);
	cr_assert(f->message.find("out of range") != std::string::npos, "%s", f->message.c_str());
	expect_tensor(out, [&](const int64_t *i) { return before.get(i); }, Tol{0, 0}, "untouched after the fault");
	const Tensor sx = Tensor::make(NEURON_DTYPE_I64, {2, 2});
	for (int64_t r = 0; r < 2; ++r)
		for (int64_t c = 0; c < 2; ++c) {
			int64_t p[2] = {r, c};
			sx.set(p, r == 1 && c == 1 ? -1 : 0);
		}
	auto sc = make_cmd(NEURON_OP_SCATTER, {&out, &sx, &src});
	std::vector<View> sv{out.view(), sx.view(), src.view()};
	const auto g = neuron::kernels::execute(sc, sv, 1);
	cr_assert(g && g->code == NEURON_FAULT_EXEC);
	expect_tensor(out, [&](const int64_t *i) { return before.get(i); }, Tol{0, 0}, "untouched after the scatter fault");
}

Test(index_copy, semantic_rejections)
{
	const Tensor f = Tensor::make(NEURON_DTYPE_F32, {4, 3}), f2 = Tensor::make(NEURON_DTYPE_F32, {2, 3}),
		     i = Tensor::make(NEURON_DTYPE_I64, {2}), fi = Tensor::make(NEURON_DTYPE_F32, {2}),
		     h = Tensor::make(NEURON_DTYPE_F16, {2, 3}), i2 = Tensor::make(NEURON_DTYPE_I64, {2, 3}),
		     i3 = Tensor::make(NEURON_DTYPE_I64, {3});
	auto ok = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i, &f2});
	cr_assert(!neuron::kernels::check_semantics(ok));
	auto fidx = make_cmd(NEURON_OP_INDEX_COPY, {&f, &fi, &f2});
	cr_assert(neuron::kernels::check_semantics(fidx), "float index accepted");
	auto mixed = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i, &h});
	cr_assert(neuron::kernels::check_semantics(mixed), "mixed dtypes accepted");
	auto len = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i3, &f2});
	cr_assert(neuron::kernels::check_semantics(len), "index length != src's dim accepted");
	auto ndim = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i2, &f2});
	cr_assert(neuron::kernels::check_semantics(ndim), "2-d index accepted");
	auto dim = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i, &f2});
	dim.iscalars[0] = 2;
	cr_assert(neuron::kernels::check_semantics(dim), "dim past ndim accepted");
	auto scal = make_cmd(NEURON_OP_INDEX_COPY, {&f, &i, &f2});
	scal.iscalars[1] = 1;
	cr_assert(neuron::kernels::check_semantics(scal), "unused scalar accepted");
	auto sc = make_cmd(NEURON_OP_SCATTER, {&f, &i2, &f2});
	cr_assert(!neuron::kernels::check_semantics(sc));
	auto sbig = make_cmd(NEURON_OP_SCATTER, {&f2, &i2, &f}); // index shape != src's
	cr_assert(neuron::kernels::check_semantics(sbig), "scatter index/src shape mismatch accepted");
	auto srank = make_cmd(NEURON_OP_SCATTER, {&f, &i, &fi});
	cr_assert(neuron::kernels::check_semantics(srank), "scatter rank mismatch accepted");
}
