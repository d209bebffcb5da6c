// SUM / MEAN / AMAX against double references: every dim mask of 3-d inputs,
// input/output dtype pairs, strided inputs, empty reductions, NaN, 0-d, and
// sizes that take the parallel paths (split by outputs and by reduced range).
#include "ref.h"

using namespace ref;

namespace {

enum class RL { Contig, Transposed, Sliced };

Tensor make_in(int dt, const std::vector<int64_t> &s, RL l)
{
	const size_t n = s.size();
	if (l == RL::Transposed && n >= 2) {
		std::vector<int64_t> t(s.rbegin(), s.rend());
		Tensor x = Tensor::make(dt, t);
		for (size_t i = 0; i < n / 2; ++i)
			x = x.transpose(static_cast<int>(i), static_cast<int>(n - 1 - i));
		return x;
	}
	if (l == RL::Sliced && n >= 1) {
		std::vector<int64_t> t = s;
		t[0] = 3 * s[0];
		return Tensor::make(dt, t).slice(0, 2, t[0], 3);
	}
	return Tensor::make(dt, s);
}

void red_case(uint16_t opc, int odt, int idt, const std::vector<int64_t> &s, uint64_t mask, RL l, bool out_strided = false,
	      int threads = 4)
{
	const Tensor in = make_in(idt, s, l);
	std::vector<int64_t> os = s;
	for (size_t d = 0; d < s.size(); ++d)
		if ((mask >> d) & 1)
			os[d] = 1;
	const Tensor out = out_strided ? make_in(odt, os, RL::Transposed) : Tensor::make(odt, os);
	if (is_float(idt))
		in.randomize(21, -4, 4);
	else
		in.randomize(21, idt == NEURON_DTYPE_U8 ? 0 : -100, 100);
	auto cmd = make_cmd(opc, {&out, &in});
	cmd.iscalars[0] = static_cast<int64_t>(mask);
	run(cmd, {&out, &in}, threads);

	int64_t count = 1;
	for (size_t d = 0; d < s.size(); ++d)
		if ((mask >> d) & 1)
			count *= s[d];
	const std::string what = std::string(neuron::kernels::op_name(opc)) + " " + shape_str(in) + " -> " +
				 shape_str(out) + " mask " + std::to_string(mask);
	// Sums accumulate in double, so f32 results are exact up to the final rounding;
	// a mean of integers is exact too.
	Tol t = tol_for(odt);
	expect_tensor(
		out,
		[&](const int64_t *oi) {
			// Walk the reduced sub-box of the input for this output index.
			double acc = opc == NEURON_OP_AMAX ? -INFINITY : 0;
			bool nan = false;
			const int nd = in.ndim;
			int64_t idx[NEURON_MAX_DIMS];
			for (int d = 0; d < nd; ++d)
				idx[d] = oi[d];
			if (count > 0)
				for (;;) {
					double v = in.get(idx);
					if (!is_float(odt) && is_float(idt))
						v = std::trunc(v);
					if (opc == NEURON_OP_AMAX) {
						nan = nan || v != v;
						acc = std::max(acc, v);
					} else {
						acc += v;
					}
					int d = nd - 1;
					for (; d >= 0; --d) {
						if (!((mask >> d) & 1))
							continue;
						if (++idx[d] < in.sizes[d])
							break;
						idx[d] = 0;
					}
					if (d < 0)
						break;
				}
			if (nan)
				return static_cast<double>(NAN);
			if (opc == NEURON_OP_MEAN)
				return acc / static_cast<double>(count);
			return acc;
		},
		t, what);
}

} // namespace

Test(reduce, all_masks_3d)
{
	const std::vector<int64_t> s = {4, 5, 6};
	for (uint64_t mask = 0; mask < 8; ++mask)
		for (RL l : {RL::Contig, RL::Transposed, RL::Sliced}) {
			red_case(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, s, mask, l);
			red_case(NEURON_OP_MEAN, NEURON_DTYPE_F32, NEURON_DTYPE_F32, s, mask, l);
			red_case(NEURON_OP_AMAX, NEURON_DTYPE_F32, NEURON_DTYPE_F32, s, mask, l);
			red_case(NEURON_OP_SUM, NEURON_DTYPE_I64, NEURON_DTYPE_I32, s, mask, l, true);
			red_case(NEURON_OP_AMAX, NEURON_DTYPE_I64, NEURON_DTYPE_I64, s, mask, l, true);
		}
}

Test(reduce, dtype_pairs)
{
	const std::vector<int64_t> s = {3, 7, 5};
	for (uint64_t mask : {1u, 2u, 4u, 5u, 7u}) {
		// SUM: any input, any output but bool.
		for (int odt : kAllDtypes) {
			if (odt == NEURON_DTYPE_BOOL)
				continue;
			for (int idt : kAllDtypes)
				red_case(NEURON_OP_SUM, odt, idt, s, mask, RL::Transposed);
		}
		// MEAN: floating outputs.
		for (int odt : kFloatDtypes)
			for (int idt : kAllDtypes)
				red_case(NEURON_OP_MEAN, odt, idt, s, mask, RL::Sliced);
		// AMAX: same dtype.
		for (int dt : kAllDtypes)
			red_case(NEURON_OP_AMAX, dt, dt, s, mask, RL::Contig);
	}
}

Test(reduce, edge_shapes)
{
	for (uint16_t opc : {NEURON_OP_SUM, NEURON_OP_MEAN, NEURON_OP_AMAX}) {
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {}, 0, RL::Contig);   // 0-d
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {1}, 1, RL::Contig);  // one element
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {9}, 1, RL::Sliced);  // strided 1-d
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {0, 5}, 2, RL::Contig); // no outputs
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {7, 1, 3}, 2, RL::Contig);
	}
	// Empty reductions: sum 0, mean NaN (AMAX is rejected by check_semantics).
	red_case(NEURON_OP_SUM, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {0, 5}, 1, RL::Contig);
	red_case(NEURON_OP_SUM, NEURON_DTYPE_I64, NEURON_DTYPE_I32, {3, 0}, 2, RL::Contig);
	red_case(NEURON_OP_MEAN, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {0, 5}, 3, RL::Contig);
}

Test(reduce, amax_nan_propagates)
{
	for (int dt : kFloatDtypes) {
		Tensor in = Tensor::make(dt, {3, 40}), out = Tensor::make(dt, {3, 1});
		in.randomize(4);
		int64_t i[2] = {1, 17};
		in.set(i, NAN);
		auto cmd = make_cmd(NEURON_OP_AMAX, {&out, &in});
		cmd.iscalars[0] = 2;
		run(cmd, {&out, &in});
		int64_t o[2] = {1, 0};
		cr_assert(std::isnan(out.get(o)), "amax of a row with NaN must be NaN");
		o[0] = 0;
		cr_assert(!std::isnan(out.get(o)));
	}
}

Test(reduce, large_parallel)
{
	for (uint16_t opc : {NEURON_OP_SUM, NEURON_OP_MEAN, NEURON_OP_AMAX}) {
		// > 2 x 2^19 elements: split by outputs, or by the reduced range when there
		// are fewer outputs than threads.
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {1030, 1030}, 1, RL::Contig);     // outer reduction
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {1030, 1030}, 2, RL::Contig);     // inner reduction
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {1030, 1030}, 3, RL::Transposed); // full
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {400000, 3}, 1, RL::Contig);    // few outputs, outer
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {2, 600000}, 2, RL::Sliced);    // few outputs, inner
		red_case(opc, NEURON_DTYPE_BF16, NEURON_DTYPE_BF16, {1030, 1030}, 2, RL::Transposed);
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {1030, 1030}, 1, RL::Contig, false, 1);
		red_case(opc, NEURON_DTYPE_F32, NEURON_DTYPE_F32, {200, 3000}, 1, RL::Contig);   // outer, 2 tiles wide
	}
	red_case(NEURON_OP_SUM, NEURON_DTYPE_I64, NEURON_DTYPE_U8, {400000, 3}, 3, RL::Contig);
	red_case(NEURON_OP_AMAX, NEURON_DTYPE_I32, NEURON_DTYPE_I32, {400000, 3}, 1, RL::Contig);
}

Test(reduce, f32_sum_accuracy)
{
	// 2^20 copies of 0.1f: a float running sum drifts by ~1%; double accumulation
	// gives the exact sum rounded once.
	Tensor in = Tensor::make(NEURON_DTYPE_F32, {1 << 20}), out = Tensor::make(NEURON_DTYPE_F32, {1});
	in.each([&](const int64_t *i) { in.set(i, 0.1); });
	auto cmd = make_cmd(NEURON_OP_SUM, {&out, &in});
	cmd.iscalars[0] = 1;
	run(cmd, {&out, &in});
	int64_t o = 0;
	const double want = static_cast<double>(0.1f) * (1 << 20);
	cr_assert_eq(out.get(&o), to_f32(want), "got %.9g want %.9g", out.get(&o), want);
}

// ISA 1.3: i[1] = NEURON_REDUCE_ACCUMULATE combines with the output's old value,
// i[2] > 0 is MEAN's divisor (the chip's tiles of a reduction along a reduced dim).
Test(reduce, accumulate_and_mean_divisor)
{
	for (uint16_t opc : {NEURON_OP_SUM, NEURON_OP_MEAN, NEURON_OP_AMAX})
		for (int64_t divisor : {int64_t{0}, int64_t{7}}) {
			if (divisor && opc != NEURON_OP_MEAN)
				continue;
			const Tensor in = make_in(NEURON_DTYPE_F32, {4, 5, 6}, RL::Transposed);
			in.randomize(31, -4, 4);
			const Tensor out = Tensor::make(NEURON_DTYPE_F32, {4, 1, 6});
			out.randomize(32, -8, 8);
			int64_t nan_at[3] = {2, 0, 3};
			out.set(nan_at, NAN); // an old NaN stays NaN (amax) or poisons the sum
			std::vector<double> old;
			out.each([&](const int64_t *i) { old.push_back(out.get(i)); });
			auto cmd = make_cmd(opc, {&out, &in});
			cmd.iscalars[0] = 2;
			cmd.iscalars[1] = NEURON_REDUCE_ACCUMULATE;
			cmd.iscalars[2] = divisor;
			run(cmd, {&out, &in});
			size_t k = 0;
			out.each([&](const int64_t *o) {
				double acc = opc == NEURON_OP_AMAX ? -INFINITY : 0;
				int64_t i[3] = {o[0], 0, o[2]};
				for (i[1] = 0; i[1] < 5; ++i[1])
					acc = opc == NEURON_OP_AMAX ? std::max(acc, in.get(i)) : acc + in.get(i);
				if (opc == NEURON_OP_MEAN)
					acc /= divisor ? double(divisor) : 5.0;
				const double want = opc == NEURON_OP_AMAX ? (old[k] != old[k] ? old[k] : std::max(old[k], acc))
									   : old[k] + acc;
				const double got = out.get(o);
				++k;
				if (want != want) {
					cr_assert(got != got, "%s accumulate: NaN expected", neuron::kernels::op_name(opc));
					return;
				}
				cr_assert(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)), "%s accumulate (divisor %lld): got %g want %g",
					  neuron::kernels::op_name(opc), (long long)divisor, got, want);
			});
		}
}
