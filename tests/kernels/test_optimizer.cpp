// ISA 1.2 ADAM_STEP against a double reference of torch.optim's Adam / AdamW
// update: contiguous, transposed and sliced operands, f32/bf16/f16 states, the
// step count as an f32 or i64 operand, maximize and weight decay in both modes;
// and the rejections: shapes, dtypes, scalars, flags, a bad step value, and
// overlapping outputs (geometry's rule for multi-output ops).
#include "ref.h"

#include "geometry.h"

#include <cstring>

using namespace ref;

namespace {

struct Hyper {
	double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.0;
	bool decoupled = false, maximize = false;
};

neuron_cmd adam_cmd(const Tensor &p, const Tensor &m, const Tensor &v, const Tensor &g, const Tensor &step, const Hyper &h)
{
	auto cmd = make_cmd(NEURON_OP_ADAM_STEP, {&p, &m, &v, &g, &step});
	cmd.fscalars.f[0] = h.lr;
	cmd.fscalars.f[1] = h.beta1;
	cmd.fscalars.f[2] = h.beta2;
	cmd.fscalars.f[3] = h.eps;
	cmd.iscalars[0] = (h.decoupled ? NEURON_ADAM_DECOUPLED : 0) | (h.maximize ? NEURON_ADAM_MAXIMIZE : 0);
	std::memcpy(&cmd.iscalars[1], &h.wd, sizeof(h.wd));
	return cmd;
}

Tensor layout(int dt, int kind)
{
	switch (kind) {
	case 0: return Tensor::make(dt, {7, 13});
	case 1: return Tensor::make(dt, {13, 7}).transpose(0, 1);
	default: return Tensor::make(dt, {7, 26}).slice(1, 0, 26, 2);
	}
}

void adam_case(int pdt, int sdt, int kind, const Hyper &h, double t, int step_dt = NEURON_DTYPE_F32)
{
	const Tensor p = layout(pdt, kind), m = layout(sdt, (kind + 1) % 3), v = layout(sdt, (kind + 2) % 3),
		     g = layout(pdt, kind);
	p.randomize(1, -2, 2);
	m.randomize(2, -0.5, 0.5);
	v.randomize(3, 0, 0.3);
	g.randomize(4, -1, 1);
	const Tensor step = Tensor::make(step_dt, {});
	const int64_t none[1] = {0};
	step.set(none, t);
	const Tensor p0 = p.clone(), m0 = m.clone(), v0 = v.clone();
	run(adam_cmd(p, m, v, g, step, h), {&p, &m, &v, &g, &step});

	// The reference, in double, from the old (already quantised) values.
	auto ref = [&](const int64_t *i, int which) {
		double gi = g.get(i), pi = p0.get(i);
		if (h.maximize)
			gi = -gi;
		if (h.wd != 0) {
			if (h.decoupled)
				pi *= 1 - h.lr * h.wd;
			else
				gi += h.wd * pi;
		}
		const double mi = h.beta1 * m0.get(i) + (1 - h.beta1) * gi;
		const double vi = h.beta2 * v0.get(i) + (1 - h.beta2) * gi * gi;
		if (which == 1)
			return mi;
		if (which == 2)
			return vi;
		const double denom = std::sqrt(vi) / std::sqrt(1 - std::pow(h.beta2, t)) + h.eps;
		return pi - h.lr / (1 - std::pow(h.beta1, t)) * mi / denom;
	};
	const std::string what = std::string("adam ") + dname(pdt) + "/" + dname(sdt) + " layout " + std::to_string(kind) +
				 " t=" + std::to_string(t) + (h.decoupled ? " adamw" : " adam") + (h.maximize ? " max" : "") +
				 " wd " + std::to_string(h.wd);
	const Tol tp = pdt == NEURON_DTYPE_F32 ? Tol{1e-5, 1e-6} : tol_for(pdt);
	const Tol ts = sdt == NEURON_DTYPE_F32 ? Tol{1e-5, 1e-7} : tol_for(sdt);
	expect_tensor(p, [&](const int64_t *i) { return ref(i, 0); }, tp, what + " param");
	expect_tensor(m, [&](const int64_t *i) { return ref(i, 1); }, ts, what + " exp_avg");
	expect_tensor(v, [&](const int64_t *i) { return ref(i, 2); }, ts, what + " exp_avg_sq");
}

} // namespace

Test(optimizer, adam_step_matches_reference)
{
	for (int kind = 0; kind < 3; ++kind)
		for (bool decoupled : {false, true})
			for (double wd : {0.0, 0.05})
				for (bool maximize : {false, true}) {
					Hyper h;
					h.decoupled = decoupled;
					h.wd = wd;
					h.maximize = maximize;
					adam_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, kind, h, 1);
					adam_case(NEURON_DTYPE_F32, NEURON_DTYPE_F32, kind, h, 17, NEURON_DTYPE_I64);
				}
	Hyper h;
	h.decoupled = true;
	h.wd = 0.01;
	h.lr = 3e-4;
	h.beta1 = 0.8;
	h.beta2 = 0.95;
	h.eps = 1e-6;
	adam_case(NEURON_DTYPE_BF16, NEURON_DTYPE_F32, 1, h, 3);
	adam_case(NEURON_DTYPE_F16, NEURON_DTYPE_F16, 2, h, 250, NEURON_DTYPE_I32);
	adam_case(NEURON_DTYPE_F32, NEURON_DTYPE_BF16, 0, h, 1000);
}

Test(optimizer, adam_step_large_parallel)
{
	// > 2 x 2^19 elements: split among threads.
	Hyper h;
	h.decoupled = true;
	h.wd = 0.01;
	const Tensor p = Tensor::make(NEURON_DTYPE_F32, {1100, 1000}), m = Tensor::make(NEURON_DTYPE_F32, {1100, 1000}),
		     v = Tensor::make(NEURON_DTYPE_F32, {1100, 1000}), g = Tensor::make(NEURON_DTYPE_F32, {1100, 1000});
	p.randomize(5, -1, 1);
	m.randomize(6, -1, 1);
	v.randomize(7, 0, 1);
	g.randomize(8, -1, 1);
	const Tensor step = Tensor::make(NEURON_DTYPE_F32, {1});
	const int64_t zero[1] = {0};
	step.set(zero, 2);
	const Tensor p0 = p.clone(), m0 = m.clone(), v0 = v.clone();
	run(adam_cmd(p, m, v, g, step, h), {&p, &m, &v, &g, &step});
	expect_tensor(m, [&](const int64_t *i) { return 0.9 * m0.get(i) + 0.1 * g.get(i); }, {1e-5, 1e-7}, "large exp_avg");
	expect_tensor(
		p,
		[&](const int64_t *i) {
			const double mi = 0.9 * m0.get(i) + 0.1 * g.get(i);
			const double vi = 0.999 * v0.get(i) + 0.001 * g.get(i) * g.get(i);
			const double denom = std::sqrt(vi) / std::sqrt(1 - 0.999 * 0.999) + 1e-8;
			return p0.get(i) * (1 - 1e-2 * 0.01) - 1e-2 / (1 - 0.81) * mi / denom;
		},
		{1e-5, 1e-6}, "large param");
}

Test(optimizer, adam_step_rejections)
{
	const Tensor p = Tensor::make(NEURON_DTYPE_F32, {4, 5}), m = Tensor::make(NEURON_DTYPE_F32, {4, 5}),
		     v = Tensor::make(NEURON_DTYPE_F32, {4, 5}), g = Tensor::make(NEURON_DTYPE_F32, {4, 5}),
		     step = Tensor::make(NEURON_DTYPE_F32, {});
	const Hyper h;
	auto rejected = [](const neuron_cmd &c, const char *needle) {
		const auto f = neuron::kernels::check_semantics(c);
		cr_assert(f, "accepted: expected a fault mentioning '%s'", needle);
		cr_assert(f->code == NEURON_FAULT_BAD_OPERAND);
		cr_assert(f->message.find(needle) != std::string::npos, "'%s' lacks '%s'", f->message.c_str(), needle);
	};
	cr_assert(!neuron::kernels::check_semantics(adam_cmd(p, m, v, g, step, h)));
	const Tensor wrong_shape = Tensor::make(NEURON_DTYPE_F32, {5, 4});
	rejected(adam_cmd(p, m, wrong_shape, g, step, h), "operand 2 (exp_avg_sq)");
	const Tensor ints = Tensor::make(NEURON_DTYPE_I32, {4, 5});
	rejected(adam_cmd(p, m, v, ints, step, h), "operand 3 (grad)");
	const Tensor two_steps = Tensor::make(NEURON_DTYPE_F32, {2});
	rejected(adam_cmd(p, m, v, g, two_steps, h), "step count is one element");
	const Tensor bool_step = Tensor::make(NEURON_DTYPE_BOOL, {});
	rejected(adam_cmd(p, m, v, g, bool_step, h), "operand 4 (step)");
	Hyper bad_beta = h;
	bad_beta.beta2 = 1.0;
	rejected(adam_cmd(p, m, v, g, step, bad_beta), "beta2");
	Hyper bad_lr = h;
	bad_lr.lr = NAN;
	rejected(adam_cmd(p, m, v, g, step, bad_lr), "lr");
	Hyper bad_wd = h;
	bad_wd.wd = -1;
	rejected(adam_cmd(p, m, v, g, step, bad_wd), "weight_decay");
	auto flags = adam_cmd(p, m, v, g, step, h);
	flags.iscalars[0] = 4;
	rejected(flags, "flags");
	auto unused = adam_cmd(p, m, v, g, step, h);
	unused.iscalars[2] = 1;
	rejected(unused, "i[2]");
	auto arity = adam_cmd(p, m, v, g, step, h);
	arity.num_operands = 4;
	std::memset(&arity.operands[4], 0, sizeof(arity.operands[4]));
	rejected(arity, "num_operands");

	// A step value that is not a positive integer faults at execution.
	const int64_t none[1] = {0};
	step.set(none, 0);
	const auto cmd = adam_cmd(p, m, v, g, step, h);
	std::vector<View> views{p.view(), m.view(), v.view(), g.view(), step.view()};
	const auto e = neuron::kernels::execute(cmd, views, 1);
	cr_assert(e && e->code == NEURON_FAULT_EXEC && e->message.find("step") != std::string::npos);
}

Test(optimizer, adam_step_outputs_must_be_disjoint)
{
	// Operands 0-2 are all written: unlike single-output elementwise ops, even an
	// exact alias (param == exp_avg) or an input overlapping any output is refused.
	const Tensor p = Tensor::make(NEURON_DTYPE_F32, {4, 5}), g = Tensor::make(NEURON_DTYPE_F32, {4, 5}),
		     step = Tensor::make(NEURON_DTYPE_F32, {});
	const Hyper h;
	const auto cmd = adam_cmd(p, p, g, g, step, h);
	using neuron::kernels::ByteRange;
	const uint64_t a = 0x1000, b = 0x2000, s = 0x3000, n = 80;
	const ByteRange alias[5] = {{a, n}, {a, n}, {b, n}, {s + 8, n}, {s, 4}};
	auto f = neuron::kernels::check_output_overlap(cmd, alias);
	cr_assert(f && f->code == NEURON_FAULT_OVERLAP && f->message.find("operand 0") != std::string::npos);
	const ByteRange grad_in_state[5] = {{a, n}, {b, n}, {s, n}, {s + 40, n}, {0x9000, 4}};
	f = neuron::kernels::check_output_overlap(cmd, grad_in_state);
	cr_assert(f && f->code == NEURON_FAULT_OVERLAP && f->message.find("operand 2") != std::string::npos);
	const ByteRange disjoint[5] = {{a, n}, {b, n}, {s, n}, {0x8000, n}, {0x9000, 4}};
	cr_assert(!neuron::kernels::check_output_overlap(cmd, disjoint));
}
