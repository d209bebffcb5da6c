// Random numbers on the chip: each op is one ISA 1.4 command (cmd.h: RNG,
// DROPOUT, RANDPERM, MULTINOMIAL) drawing from Philox4x32-10 at the generator's
// (seed, offset); the generator (generator.h) advances its offset by one per
// command. Nothing is sampled on the host.
#include "cmds.h"
#include "generator.h"

#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

namespace torch_neuron {

namespace {

neuron_cmd random_cmd(int op, int arity, const PhiloxDraw &draw)
{
	neuron_cmd cmd;
	cmd_init(cmd, op, arity);
	cmd.iscalars[1] = static_cast<int64_t>(draw.seed);
	cmd.iscalars[2] = static_cast<int64_t>(draw.offset);
	return cmd;
}

// Runs fill(target) on self, or on a chip-dtype temporary copied into self when
// self's dtype has no chip encoding (int16, int8, ...). `work` is the dtype the
// temporary takes.
template <class F> Tensor &on_chip(Tensor &self, c10::ScalarType work, F &&fill)
{
	if (self.numel() == 0)
		return self;
	if (chip_ok(self)) {
		fill(self);
		return self;
	}
	Tensor tmp = at::empty(self.sizes(), self.options().dtype(work));
	fill(tmp);
	self.copy_(tmp);
	return self;
}

// One RNG command of distribution `dist` into out.
void rng_into(const Tensor &out, int dist, double f0, double f1, const std::optional<at::Generator> &gen,
	      uint64_t from = 0, uint64_t range = 0)
{
	neuron_cmd cmd = random_cmd(NEURON_OP_RNG, 1, next_draw(gen, out.device()));
	cmd.operands[0] = desc(out);
	cmd.iscalars[0] = dist;
	if (dist == NEURON_RNG_INTEGER) {
		cmd.fscalars.bits[0] = from;
		cmd.fscalars.bits[1] = range;
	} else {
		cmd.fscalars.f[0] = f0;
		cmd.fscalars.f[1] = f1;
	}
	submit(out, cmd);
}

c10::ScalarType float_work(const Tensor &t)
{
	return at::isFloatingType(t.scalar_type()) ? t.scalar_type() : c10::kFloat;
}

Tensor &normal_i(Tensor &self, double mean, double std, std::optional<at::Generator> gen)
{
	if (self.is_complex()) { // as the CPU: real and imaginary parts each N(mean, std^2 / 2)
		at::Tensor parts = at::view_as_real(self);
		normal_i(parts, mean, std / std::sqrt(2.0), gen);
		return self;
	}
	NEURON_NATIVE("normal_");
	TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ expects a floating tensor, got ", self.scalar_type());
	TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
	return on_chip(self, c10::kFloat, [&](const Tensor &t) { rng_into(t, NEURON_RNG_NORMAL, mean, std, gen); });
}

Tensor &uniform_i(Tensor &self, double from, double to, std::optional<at::Generator> gen)
{
	if (self.is_complex()) { // as the CPU: real and imaginary parts each uniform
		at::Tensor parts = at::view_as_real(self);
		uniform_i(parts, from, to, gen);
		return self;
	}
	NEURON_NATIVE("uniform_");
	TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ expects a floating tensor, got ", self.scalar_type());
	TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
	return on_chip(self, c10::kFloat, [&](const Tensor &t) { rng_into(t, NEURON_RNG_UNIFORM, from, to, gen); });
}

Tensor &bernoulli_fi(Tensor &self, double p, std::optional<at::Generator> gen)
{
	NEURON_NATIVE("bernoulli_");
	TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
	return on_chip(self, float_work(self), [&](const Tensor &t) { rng_into(t, NEURON_RNG_BERNOULLI, p, 0, gen); });
}

// self = (u < p) with p broadcast to self: one uniform draw, one comparison.
Tensor &bernoulli_ti(Tensor &self, const Tensor &p_in, std::optional<at::Generator> gen)
{
	NEURON_NATIVE("bernoulli_");
	TORCH_CHECK(at::isFloatingType(p_in.scalar_type()), "bernoulli_ expects floating probabilities, got ", p_in.scalar_type());
	if (self.numel() == 0)
		return self;
	Tensor p = on_device(p_in, self).to(c10::kFloat);
	Tensor u = at::empty(self.sizes(), self.options().dtype(c10::kFloat));
	rng_into(u, NEURON_RNG_UNIFORM, 0, 1, gen);
	Tensor keep = at::empty(self.sizes(), self.options().dtype(c10::kBool));
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COMPARE, 3);
	cmd.operands[0] = desc(keep);
	cmd.operands[1] = desc(u);
	cmd.operands[2] = desc_as(p, self.sizes());
	cmd.iscalars[0] = NEURON_CMP_LT;
	submit(self, cmd);
	self.copy_(keep);
	return self;
}

Tensor bernoulli_t(const Tensor &p, std::optional<at::Generator> gen)
{
	Tensor out = at::empty(p.sizes(), p.options());
	bernoulli_ti(out, p, gen);
	return out;
}

Tensor bernoulli_p(const Tensor &self, double p, std::optional<at::Generator> gen)
{
	Tensor out = at::empty(self.sizes(), self.options());
	bernoulli_fi(out, p, gen);
	return out;
}

// ---- random_: integers in [from, from + range) (range 0: every 64-bit value) ----

// The largest value random_() without `to` draws: the dtype's max, or for
// floating dtypes 2^digits (every integer up to it is exact), as PyTorch.
int64_t random_max(c10::ScalarType t)
{
	switch (t) {
	case c10::kFloat: return int64_t{1} << 24;
	case c10::kDouble: return int64_t{1} << 24; // stored as float32 on neuron
	case c10::kHalf: return int64_t{1} << 11;
	case c10::kBFloat16: return int64_t{1} << 8;
	case c10::kBool: return 1;
	default:
		return AT_DISPATCH_INTEGRAL_TYPES(t, "random_max", [] { return static_cast<int64_t>(std::numeric_limits<scalar_t>::max()); });
	}
}

Tensor &random_range(Tensor &self, int64_t from, uint64_t range, const std::optional<at::Generator> &gen)
{
	NEURON_NATIVE("random_");
	const c10::ScalarType work = at::isFloatingType(self.scalar_type()) ? c10::kFloat : c10::kLong;
	return on_chip(self, self.scalar_type() == c10::kBool ? c10::kLong : work, [&](const Tensor &t) {
		if (t.scalar_type() == c10::kBool) { // the chip's INTEGER has no bool: draw 0/1 as BERNOULLI(1/2)
			rng_into(t, NEURON_RNG_BERNOULLI, 0.5, 0, gen);
			return;
		}
		rng_into(t, NEURON_RNG_INTEGER, 0, 0, gen, static_cast<uint64_t>(from), range);
	});
}

Tensor &random_i(Tensor &self, std::optional<at::Generator> gen)
{
	return random_range(self, 0, static_cast<uint64_t>(random_max(self.scalar_type())) + 1, gen);
}

Tensor &random_to_i(Tensor &self, int64_t to, std::optional<at::Generator> gen)
{
	TORCH_CHECK(to > 0, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
	return random_range(self, 0, static_cast<uint64_t>(to), gen);
}

Tensor &random_from_i(Tensor &self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen)
{
	if (to) {
		TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
		return random_range(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), gen);
	}
	const int64_t max = random_max(self.scalar_type());
	TORCH_CHECK(from <= max, "random_ expects 'from' to be at most ", max, " for ", self.scalar_type(), ", got ", from);
	// [from, max]; from = INT64_MIN with max = INT64_MAX is every value (range 0).
	return random_range(self, from, static_cast<uint64_t>(max) - static_cast<uint64_t>(from) + 1, gen);
}

// ---- dropout: one DROPOUT command (mask and output) ----

std::tuple<Tensor, Tensor> native_dropout(const Tensor &x, double p, std::optional<bool> train)
{
	NEURON_NATIVE("native_dropout");
	TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
	Tensor mask = at::empty(x.sizes(), x.options().dtype(c10::kBool));
	if (train.has_value() && !*train) {
		fill_cmd(mask, true);
		return {x.clone(), mask};
	}
	TORCH_CHECK(float_dev(x), "neuron: dropout needs a floating tensor");
	Tensor out = at::empty(x.sizes(), x.options());
	if (x.numel() == 0)
		return {out, mask};
	const double keep = 1.0 - p;
	neuron_cmd cmd = random_cmd(NEURON_OP_DROPOUT, 3, next_draw(std::nullopt, x.device()));
	cmd.operands[0] = desc(out);
	cmd.operands[1] = desc(mask);
	cmd.operands[2] = desc(x);
	cmd.fscalars.f[0] = keep == 0 ? 0.0 : 1.0 / keep; // as PyTorch: p = 1 drops everything
	cmd.fscalars.f[1] = keep;
	submit(out, cmd);
	return {out, mask};
}

Tensor native_dropout_backward(const Tensor &g, const Tensor &mask, double scale)
{
	NEURON_NATIVE("native_dropout_backward");
	Tensor out = at::empty(g.sizes(), g.options());
	binary_op(NEURON_OP_MUL, out, g, mask);
	scalar_op(NEURON_OP_MUL_SCALAR, out, out, scale);
	return out;
}

// ---- randperm, multinomial ----

Tensor &randperm_out(int64_t n, std::optional<at::Generator> gen, Tensor &out)
{
	NEURON_NATIVE("randperm");
	TORCH_CHECK(n >= 0, "randperm expects n >= 0, but got n=", n);
	const c10::ScalarType dt = out.scalar_type();
	TORCH_CHECK(dt == c10::kFloat || dt == c10::kDouble || dt == c10::kHalf || dt == c10::kBFloat16 ||
			    at::isIntegralType(dt, false),
		    "randperm is not implemented for ", dt);
	out.resize_({n});
	const bool direct = out.is_contiguous() && (dt == c10::kLong || dt == c10::kInt || dt == c10::kFloat);
	Tensor target = direct ? out : at::empty({n}, out.options().dtype(c10::kLong));
	if (n > 0) {
		neuron_cmd cmd = random_cmd(NEURON_OP_RANDPERM, 1, next_draw(gen, out.device()));
		cmd.operands[0] = desc(target);
		submit(target, cmd);
	}
	if (!direct)
		out.copy_(target);
	return out;
}

Tensor &multinomial_out(const Tensor &self, int64_t n, bool replacement, std::optional<at::Generator> gen,
			Tensor &out)
{
	NEURON_NATIVE("multinomial");
	TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
	TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
		    self.scalar_type());
	TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
	const int64_t categories = self.size(-1);
	TORCH_CHECK(replacement || n <= categories,
		    "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
	std::vector<int64_t> shape = self.sizes().vec();
	shape.back() = n;
	out.resize_(shape);
	Tensor probs = chip_ok(self) ? self : self.to(c10::kFloat);
	neuron_cmd cmd = random_cmd(NEURON_OP_MULTINOMIAL, 2, next_draw(gen, out.device()));
	Tensor target = out.scalar_type() == c10::kLong ? out : at::empty(shape, out.options().dtype(c10::kLong));
	cmd.operands[0] = desc(target);
	cmd.operands[1] = desc(probs);
	cmd.iscalars[0] = replacement ? 1 : 0;
	submit(target, cmd);
	if (!target.is_same(out))
		out.copy_(target);
	return out;
}

Tensor multinomial(const Tensor &self, int64_t n, bool replacement, std::optional<at::Generator> gen)
{
	Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
	return multinomial_out(self, n, replacement, gen, out);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("normal_", &normal_i);
	m.impl("uniform_", &uniform_i);
	m.impl("bernoulli_.float", &bernoulli_fi);
	m.impl("bernoulli_.Tensor", &bernoulli_ti);
	m.impl("bernoulli", &bernoulli_t);
	m.impl("bernoulli.p", &bernoulli_p);
	m.impl("random_", &random_i);
	m.impl("random_.to", &random_to_i);
	m.impl("random_.from", &random_from_i);
	m.impl("native_dropout", &native_dropout);
	m.impl("native_dropout_backward", &native_dropout_backward);
	m.impl("randperm.generator_out", &randperm_out);
	m.impl("multinomial", &multinomial);
	m.impl("multinomial.out", &multinomial_out);
}

} // namespace torch_neuron
