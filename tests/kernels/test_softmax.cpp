// SOFTMAX against a double reference: each dim of 1..3-d inputs, float dtypes
// (also with an output dtype different from the input's), strided layouts, large
// magnitudes (stability), NaN/-inf rows, 0-d, empty and large inputs.
#include "ref.h"

using namespace ref;

namespace {

void sm_case(int odt, int idt, const std::vector<int64_t> &s, int dim, bool transposed_in, double range = 4,
	     int threads = 4)
{
	Tensor in = Tensor::make(idt, s);
	if (transposed_in && s.size() >= 2) {
		std::vector<int64_t> t = s;
		std::swap(t[0], t[1]);
		in = Tensor::make(idt, t).transpose(0, 1);
	}
	const Tensor out = Tensor::make(odt, s);
	in.randomize(13, -range, range);
	auto cmd = make_cmd(NEURON_OP_SOFTMAX, {&out, &in});
	cmd.iscalars[0] = dim;
	run(cmd, {&out, &in}, threads);
	const std::string what = "softmax " + shape_str(in) + " -> " + shape_str(out) + " dim " + std::to_string(dim);
	// Row statistics (max, sum of exp) cached per row, keyed by the row-major index
	// of the row's first element.
	std::vector<std::pair<double, double>> rows(static_cast<size_t>(std::max<int64_t>(out.numel(), 1)), {NAN, NAN});
	expect_tensor(
		out,
		[&](const int64_t *oi) {
			int64_t idx[NEURON_MAX_DIMS] = {};
			int64_t key = 0;
			for (int d = 0; d < in.ndim; ++d) {
				idx[d] = d == dim ? 0 : oi[d];
				key = key * in.sizes[d] + idx[d];
			}
			auto &[m, sum] = rows[static_cast<size_t>(key)];
			if (m != m) {
				const int64_t len = in.ndim == 0 ? 1 : in.sizes[dim];
				m = -INFINITY;
				for (int64_t j = 0; j < len; ++j) {
					if (in.ndim)
						idx[dim] = j;
					m = std::max(m, in.get(idx));
				}
				sum = 0;
				for (int64_t j = 0; j < len; ++j) {
					if (in.ndim)
						idx[dim] = j;
					sum += std::exp(in.get(idx) - m);
				}
			}
			return std::exp(in.get(oi) - m) / sum;
		},
		odt == NEURON_DTYPE_F32 ? Tol{1e-5, 1e-7} : tol_for(odt), what);
}

} // namespace

Test(softmax, dims_and_dtypes)
{
	for (int dt : kFloatDtypes) {
		sm_case(dt, dt, {5}, 0, false);
		sm_case(dt, dt, {1}, 0, false);
		sm_case(dt, dt, {}, 0, false);
		for (int d = 0; d < 2; ++d) {
			sm_case(dt, dt, {3, 7}, d, false);
			sm_case(dt, dt, {3, 7}, d, true);
		}
		for (int d = 0; d < 3; ++d) {
			sm_case(dt, dt, {2, 3, 4}, d, false);
			sm_case(dt, dt, {2, 3, 4}, d, true);
		}
		sm_case(dt, dt, {0, 4}, 1, false);
		sm_case(dt, dt, {4, 0}, 1, false);
	}
	// Output dtype different from the input's (softmax(x, dtype=...)).
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_BF16, {3, 9}, 1, true);
	sm_case(NEURON_DTYPE_F16, NEURON_DTYPE_F32, {3, 9}, 0, false);
}

Test(softmax, numerically_stable)
{
	// exp(1000) overflows float; subtracting the max keeps it finite.
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {4, 33}, 1, false, 1000);
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {4, 33}, 0, true, 1000);
	sm_case(NEURON_DTYPE_BF16, NEURON_DTYPE_BF16, {4, 33}, 1, false, 1e30);

	// A row with NaN is all NaN; a row of -inf is NaN (0/0), as in PyTorch.
	Tensor in = Tensor::make(NEURON_DTYPE_F32, {2, 3}), out = Tensor::make(NEURON_DTYPE_F32, {2, 3});
	in.each([&](const int64_t *i) { in.set(i, i[0] == 0 ? (i[1] == 1 ? NAN : 1.0) : -INFINITY); });
	auto cmd = make_cmd(NEURON_OP_SOFTMAX, {&out, &in});
	cmd.iscalars[0] = 1;
	run(cmd, {&out, &in});
	out.each([&](const int64_t *i) { cr_assert(std::isnan(out.get(i))); });
}

Test(softmax, large_parallel)
{
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {70000}, 0, false);
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {400, 400}, 1, false);
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {400, 400}, 0, true);
	sm_case(NEURON_DTYPE_BF16, NEURON_DTYPE_BF16, {400, 400}, 1, true);
	sm_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, {400, 400}, 1, false, 4, 1);
}
