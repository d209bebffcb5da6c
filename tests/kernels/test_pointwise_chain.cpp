// ISA 1.5 POINTWISE against its formula evaluated in float, element by element:
// each step computes what its unfused opcode computes in f32, so the results must
// be those bits exactly (after the output's rounding). Covers the kernel's paths:
// f32 operands read in place, others converted (bf16, strided, broadcast with
// stride 0 as a layer norm's row statistics and affine parameters), the output
// written in place, strided or as bf16, rows shorter and longer than a block.
#include "ref.h"

using namespace ref;

namespace {

uint64_t step(int fn, int a, int b = 0) { return static_cast<uint64_t>(fn | a << 6 | b << 11); }

void set_steps(neuron_cmd &c, const std::vector<uint64_t> &steps)
{
	for (size_t s = 0; s < steps.size(); ++s)
		c.iscalars[s / 4] = static_cast<int64_t>(static_cast<uint64_t>(c.iscalars[s / 4]) | steps[s] << (16 * (s % 4)));
}

float f(const Tensor &t, const int64_t *i) { return static_cast<float>(t.get(i)); }

} // namespace

Test(isa15_pointwise, layer_norm_pass_with_broadcast_operands)
{
	// out = (x - mean) * rstd * w + b over [R, C]; mean and rstd [R, 1] and w, b [C]
	// broadcast to [R, C] with stride 0.
	// Rows of 29 and 64 are gathered several to a block (a block of 512 ends
	// inside a row of 29), rows of 700 run one by one.
	for (int64_t C : {29, 64, 700})
		for (int xdt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16})
			for (int odt : {NEURON_DTYPE_F32, NEURON_DTYPE_BF16}) {
				const int64_t R = 37;
				const Tensor x = Tensor::make(xdt, {R, C});
				x.randomize(1, -3, 3);
				Tensor mean = Tensor::make(NEURON_DTYPE_F32, {R, 1}), rstd = Tensor::make(NEURON_DTYPE_F32, {R, 1});
				mean.randomize(2, -1, 1);
				rstd.randomize(3, 0.5, 2);
				Tensor w = Tensor::make(NEURON_DTYPE_F32, {1, C}), b = Tensor::make(NEURON_DTYPE_F32, {1, C});
				w.randomize(4, -2, 2);
				b.randomize(5, -2, 2);
				mean = mean.expand(1, C);
				rstd = rstd.expand(1, C);
				w = w.expand(0, R);
				b = b.expand(0, R);
				const Tensor out = Tensor::make(odt, {R, C});
				neuron_cmd cmd = make_cmd(NEURON_OP_POINTWISE, {&out, &x, &mean, &rstd, &w, &b});
				set_steps(cmd, {step(NEURON_PW_SUB, 0, 1), step(NEURON_PW_MUL, 5, 2), step(NEURON_PW_MUL, 6, 3),
						step(NEURON_PW_ADD, 7, 4)});
				run(cmd, {&out, &x, &mean, &rstd, &w, &b});
				expect_tensor(
					out,
					[&](const int64_t *i) {
						return static_cast<double>((f(x, i) - f(mean, i)) * f(rstd, i) * f(w, i) + f(b, i));
					},
					{0, 0}, "layer norm pass, " + shape_str(x) + " -> " + shape_str(out));
			}
}

Test(isa15_pointwise, in_place_strided_and_constants)
{
	// In place: x = (x * 1.5 - 0.25) / y, f32 contiguous (read and written in place).
	const int64_t n = 1500;
	const Tensor x = Tensor::make(NEURON_DTYPE_F32, {n}), y = Tensor::make(NEURON_DTYPE_F32, {n});
	x.randomize(6, -4, 4);
	y.randomize(7, 0.5, 3);
	const Tensor x0 = x.clone();
	neuron_cmd cmd = make_cmd(NEURON_OP_POINTWISE, {&x, &x, &y});
	set_steps(cmd, {step(NEURON_PW_MUL, 0, 21), step(NEURON_PW_SUB, 5, 22), step(NEURON_PW_DIV, 6, 1)});
	cmd.fscalars.f[0] = 1.5;
	cmd.fscalars.f[1] = 0.25;
	run(cmd, {&x, &x, &y});
	expect_tensor(
		x, [&](const int64_t *i) { return static_cast<double>((f(x0, i) * 1.5f - 0.25f) / f(y, i)); }, {0, 0},
		"in place");

	// A transposed input and a transposed output: out^T = a^T * a^T + 0.5.
	const Tensor a = Tensor::make(NEURON_DTYPE_F32, {40, 30}), o = Tensor::make(NEURON_DTYPE_F32, {40, 30});
	a.randomize(8, -2, 2);
	const Tensor at = a.transpose(0, 1), ot = o.transpose(0, 1);
	neuron_cmd c2 = make_cmd(NEURON_OP_POINTWISE, {&ot, &at});
	set_steps(c2, {step(NEURON_PW_MUL, 0, 0), step(NEURON_PW_ADD, 5, 21)});
	c2.fscalars.f[0] = 0.5;
	run(c2, {&ot, &at});
	expect_tensor(
		ot, [&](const int64_t *i) { return static_cast<double>(f(at, i) * f(at, i) + 0.5f); }, {0, 0},
		"strided");

	// In place over rows of 29 with a row operand broadcast along them: the short
	// runs are gathered into blocks, every input read before any output is written.
	const Tensor z = Tensor::make(NEURON_DTYPE_F32, {37, 29});
	Tensor r = Tensor::make(NEURON_DTYPE_F32, {37, 1});
	z.randomize(9, -3, 3);
	r.randomize(10, -1, 1);
	r = r.expand(1, 29);
	const Tensor z0 = z.clone();
	neuron_cmd c3 = make_cmd(NEURON_OP_POINTWISE, {&z, &z, &r});
	set_steps(c3, {step(NEURON_PW_SUB, 0, 1), step(NEURON_PW_MUL, 5, 21)});
	c3.fscalars.f[0] = 2.0;
	run(c3, {&z, &z, &r});
	expect_tensor(
		z, [&](const int64_t *i) { return static_cast<double>((f(z0, i) - f(r, i)) * 2.0f); }, {0, 0},
		"in place, gathered rows");
}
