// FILL and COPY against independent references: every dtype, the full 7x7 cast
// matrix, strided/broadcast/sliced layouts, empty, 0-d and >64k-element tensors.
#include "ref.h"

using namespace ref;

namespace {

// PyTorch's cast semantics, computed from the decoded source value.
double cast_ref(int dst, int src, double v)
{
	if (dst == NEURON_DTYPE_BOOL)
		return v != 0;
	if (is_float(dst))
		return quantize(dst, is_float(src) ? v : to_f32(v)); // integers go through float
	// Out of int64 range (e.g. 16777217 -> f16 is inf) is UB in C++ and platform-defined
	// in PyTorch; the kernels saturate to int64 (NaN -> 0) and then wrap.
	int64_t i;
	if (!is_float(src))
		i = static_cast<int64_t>(v);
	else if (v != v)
		i = 0;
	else if (v >= 0x1p63)
		i = INT64_MAX;
	else if (v <= -0x1p63)
		i = INT64_MIN;
	else
		i = static_cast<int64_t>(std::trunc(v));
	return static_cast<double>(wrap(dst, i));
}

const double kFloatSources[] = {-3.75, -1.5, -1, -0.0, 0, 0.5, 1, 2.5, 7, 100, 255, 300, 1000.5, 65504, 16777217};
const double kIntSources[] = {-300, -129, -128, -1, 0, 1, 2, 127, 128, 255, 256, 65535, 16777217, 3000000000.0};

void copy_case(int dst_dt, int src_dt, bool strided)
{
	const auto &vals = is_float(src_dt) ? std::vector<double>(std::begin(kFloatSources), std::end(kFloatSources))
					    : std::vector<double>(std::begin(kIntSources), std::end(kIntSources));
	const int64_t n = static_cast<int64_t>(vals.size());
	Tensor src = Tensor::make(src_dt, {strided ? 2 * n : n});
	Tensor dst = Tensor::make(dst_dt, {strided ? 3 * n : n});
	if (strided) {
		src = src.slice(0, 1, 2 * n, 2);
		dst = dst.slice(0, 2, 3 * n, 3);
	}
	for (int64_t i = 0; i < n; ++i)
		src.set(&i, vals[static_cast<size_t>(i)]);
	auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
	run(cmd, {&dst, &src});
	const std::string what = std::string("copy ") + dname(src_dt) + "->" + dname(dst_dt) + (strided ? " strided" : "");
	expect_tensor(dst, [&](const int64_t *idx) { return cast_ref(dst_dt, src_dt, src.get(idx)); }, {0, 0}, what);
	if (strided)
		expect_outside_untouched(dst, what);
}

void copy_layout(const Tensor &dst, const Tensor &src, const std::string &what, int threads = 4)
{
	src.randomize(7, -100, 100);
	auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
	run(cmd, {&dst, &src}, threads);
	expect_tensor(dst, [&](const int64_t *idx) { return cast_ref(dst.dt, src.dt, src.get(idx)); }, {0, 0}, what);
}

void fill_case(const Tensor &out, double fvalue, int64_t ivalue, const std::string &what, bool check_outside)
{
	auto cmd = make_cmd(NEURON_OP_FILL, {&out});
	if (is_float(out.dt))
		cmd.fscalars.f[0] = fvalue;
	else
		cmd.iscalars[0] = ivalue;
	run(cmd, {&out});
	const double want = is_float(out.dt) ? fvalue : static_cast<double>(wrap(out.dt, ivalue));
	expect_tensor(out, [&](const int64_t *) { return want; }, {0, 0}, what);
	if (check_outside)
		expect_outside_untouched(out, what);
}

} // namespace

Test(copy, cast_matrix_all_49_pairs)
{
	for (int d : kAllDtypes)
		for (int s : kAllDtypes) {
			copy_case(d, s, false);
			copy_case(d, s, true);
		}
}

Test(copy, float_special_values)
{
	// NaN stays NaN in every float format and is true as bool; inf survives.
	for (int s : kFloatDtypes)
		for (int d : kFloatDtypes) {
			Tensor src = Tensor::make(s, {3}), dst = Tensor::make(d, {3});
			int64_t i = 0;
			src.set(&i, NAN);
			i = 1;
			src.set(&i, INFINITY);
			i = 2;
			src.set(&i, -INFINITY);
			auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
			run(cmd, {&dst, &src});
			expect_tensor(dst, [&](const int64_t *idx) { return src.get(idx); }, {0, 0}, "copy specials");
		}
	Tensor src = Tensor::make(NEURON_DTYPE_F32, {1}), dst = Tensor::make(NEURON_DTYPE_BOOL, {1});
	int64_t i = 0;
	src.set(&i, NAN);
	auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
	run(cmd, {&dst, &src});
	cr_assert_eq(dst.get(&i), 1.0, "NaN -> bool must be true");
}

Test(copy, bf16_and_f16_round_to_nearest_even)
{
	// Halfway cases: 1 + 2^-8 is halfway between bf16 neighbours 1 and 1+2^-7 -> 1 (even);
	// 1 + 3*2^-8 -> 1 + 2^-6 (even). For f16 the same at 2^-11.
	const double xs[] = {1 + 0x1p-8, 1 + 3 * 0x1p-8, 1 + 0x1p-11, 1 + 3 * 0x1p-11, -(1 + 0x1p-8), 1e-40, 6e-8, 70000};
	for (int d : {NEURON_DTYPE_BF16, NEURON_DTYPE_F16}) {
		Tensor src = Tensor::make(NEURON_DTYPE_F32, {8}), dst = Tensor::make(d, {8});
		for (int64_t i = 0; i < 8; ++i)
			src.set(&i, xs[i]);
		auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
		run(cmd, {&dst, &src});
		expect_tensor(dst, [&](const int64_t *idx) { return src.get(idx); }, {0, 0}, "rne");
	}
	Tensor src = Tensor::make(NEURON_DTYPE_F32, {2}), dst = Tensor::make(NEURON_DTYPE_BF16, {2});
	int64_t i = 0;
	src.set(&i, 1 + 0x1p-8);
	i = 1;
	src.set(&i, 1 + 3 * 0x1p-8);
	auto cmd = make_cmd(NEURON_OP_COPY, {&dst, &src});
	run(cmd, {&dst, &src});
	i = 0;
	cr_assert_eq(dst.get(&i), 1.0);
	i = 1;
	cr_assert_eq(dst.get(&i), 1 + 0x1p-6);
}

Test(copy, strided_layouts)
{
	for (int dt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16, NEURON_DTYPE_I64, NEURON_DTYPE_U8}) {
		// transposed source
		copy_layout(Tensor::make(dt, {7, 5}), Tensor::make(dt, {5, 7}).transpose(0, 1), "transposed src");
		// broadcast source (stride 0)
		copy_layout(Tensor::make(dt, {4, 6}), Tensor::make(dt, {1, 6}).expand(0, 4), "broadcast src");
		copy_layout(Tensor::make(dt, {4, 6}), Tensor::make(dt, {4, 1}).expand(1, 6), "broadcast inner");
		// sliced destination
		Tensor dst = Tensor::make(dt, {4, 12}).slice(1, 1, 12, 2);
		copy_layout(dst, Tensor::make(dt, {4, 6}), "sliced dst");
		expect_outside_untouched(dst, "sliced dst");
		// 3-d permutation, both sides strided
		copy_layout(Tensor::make(dt, {3, 9, 4}).slice(1, 0, 9, 3), Tensor::make(dt, {4, 3, 3}).transpose(0, 2),
			    "3-d permuted");
		// empty and 0-d
		copy_layout(Tensor::make(dt, {0, 5}), Tensor::make(dt, {0, 5}), "empty");
		copy_layout(Tensor::make(dt, {}), Tensor::make(dt, {}), "0-d");
		copy_layout(Tensor::make(dt, {1}), Tensor::make(dt, {1}), "1 element");
	}
	// Casting on strided views.
	copy_layout(Tensor::make(NEURON_DTYPE_F16, {7, 5}), Tensor::make(NEURON_DTYPE_I32, {5, 7}).transpose(0, 1),
		    "i32->f16 transposed");
}

Test(copy, large_parallel)
{
	// > 2^19 elements: split among threads (copies split from 2 x 2^18 elements).
	copy_layout(Tensor::make(NEURON_DTYPE_F32, {530001}), Tensor::make(NEURON_DTYPE_F32, {530001}), "large contiguous");
	copy_layout(Tensor::make(NEURON_DTYPE_F32, {725, 729}), Tensor::make(NEURON_DTYPE_F32, {729, 725}).transpose(0, 1),
		    "large transposed (blocked)");
	copy_layout(Tensor::make(NEURON_DTYPE_BF16, {725, 729}), Tensor::make(NEURON_DTYPE_F32, {725, 729}),
		    "large f32->bf16");
	copy_layout(Tensor::make(NEURON_DTYPE_I32, {725, 729}), Tensor::make(NEURON_DTYPE_F16, {725, 729}),
		    "large f16->i32", 1);
	// Blocked transposes with ragged tiles, a batch dim, a cast and a sliced side.
	copy_layout(Tensor::make(NEURON_DTYPE_F32, {3, 37, 50}),
		    Tensor::make(NEURON_DTYPE_F32, {3, 50, 37}).transpose(1, 2), "batched transpose");
	copy_layout(Tensor::make(NEURON_DTYPE_BF16, {70, 33}), Tensor::make(NEURON_DTYPE_I64, {33, 70}).transpose(0, 1),
		    "transpose i64->bf16");
	copy_layout(Tensor::make(NEURON_DTYPE_U8, {40, 90}).slice(1, 0, 90, 3),
		    Tensor::make(NEURON_DTYPE_U8, {30, 40}).transpose(0, 1), "transpose into sliced");
}

Test(copy, exact_in_place)
{
	cr_assert(neuron::kernels::output_may_alias_inputs(NEURON_OP_COPY));
	Tensor t = Tensor::make(NEURON_DTYPE_F32, {3, 4});
	t.randomize(3);
	const Tensor before = t.clone();
	auto cmd = make_cmd(NEURON_OP_COPY, {&t, &t});
	run(cmd, {&t, &t});
	expect_tensor(t, [&](const int64_t *idx) { return before.get(idx); }, {0, 0}, "copy in place");
}

Test(fill, all_dtypes_and_layouts)
{
	for (int dt : kAllDtypes) {
		const std::string n = std::string("fill ") + dname(dt);
		fill_case(Tensor::make(dt, {}), 2.5, -3, n + " 0-d", true);
		fill_case(Tensor::make(dt, {0}), 2.5, -3, n + " empty", true);
		fill_case(Tensor::make(dt, {1}), 2.5, -3, n + " 1 element", true);
		fill_case(Tensor::make(dt, {7}), -1.25, 300, n + " [7]", true);
		fill_case(Tensor::make(dt, {3, 10}).slice(1, 0, 10, 2), 3.0, 1, n + " sliced", true);
		fill_case(Tensor::make(dt, {5, 4}).transpose(0, 1), 0.0, 0, n + " zero transposed", true);
		fill_case(Tensor::make(dt, {530001}), 0.0, 0, n + " large zero", false);
		fill_case(Tensor::make(dt, {1600000}).slice(0, 0, 1600000, 3), 1.0009765625, 7, n + " large strided", true);
	}
	// Rounding of the double value into narrow formats.
	fill_case(Tensor::make(NEURON_DTYPE_BF16, {3}), 0.1, 0, "fill bf16 0.1", false);
	fill_case(Tensor::make(NEURON_DTYPE_F16, {3}), 1e-6, 0, "fill f16 subnormal", false);
	fill_case(Tensor::make(NEURON_DTYPE_I64, {3}), 0, INT64_MIN, "fill i64 min", false);
}
