// Random numbers: the neuron generator's state drives CPU samplers (seeds reproduce
// the CPU's), then one upload; dropout (+ backward) on top of bernoulli_.
#include "cmds.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <mutex>
#include <tuple>

namespace torch_neuron {

namespace {

// ---- random numbers: the neuron generator's state drives CPU samplers ----

template <class F> Tensor &host_random(Tensor &self, const std::optional<at::Generator> &gen, F &&sample)
{
	NEURON_NATIVE("random");
	at::Generator g = gen && gen->defined() ? *gen : at::globalContext().defaultGenerator(self.device());
	TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1, "neuron: expected a neuron generator, got one for ",
		    g.device());
	at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>();
	Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU).dtype(
						     self.scalar_type() == c10::kBool ? c10::kFloat : self.scalar_type()));
	{
		std::lock_guard lock(g.mutex());
		cpu.set_state(g.get_state());
		sample(host, cpu);
		g.set_state(cpu.get_state());
	}
	self.copy_(host);
	return self;
}

Tensor &normal_i(Tensor &self, double mean, double std, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.normal_(mean, std, g); });
}
Tensor &uniform_i(Tensor &self, double from, double to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.uniform_(from, to, g); });
}
Tensor &bernoulli_fi(Tensor &self, double p, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.bernoulli_(p, g); });
}
Tensor &random_i(Tensor &self, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(g); });
}
Tensor &random_to_i(Tensor &self, int64_t to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(to, g); });
}
Tensor &random_from_i(Tensor &self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen)
{
	return host_random(self, gen, [&](Tensor &h, at::Generator &g) { h.random_(from, to, g); });
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor &x, double p, std::optional<bool> train)
{
	NEURON_NATIVE("native_dropout");
	if (train.has_value() && !*train) {
		Tensor mask = at::empty(x.sizes(), x.options().dtype(c10::kBool));
		fill_cmd(mask, true);
		return {x.clone(), mask};
	}
	TORCH_CHECK(float_dev(x), "neuron: dropout needs a floating tensor");
	Tensor mask = at::empty(x.sizes(), x.options().dtype(c10::kBool));
	bernoulli_fi(mask, 1.0 - p, std::nullopt);
	Tensor out = at::empty(x.sizes(), x.options());
	binary_op(NEURON_OP_MUL, out, x, mask);
	scalar_op(NEURON_OP_MUL_SCALAR, out, out, p >= 1.0 ? 0.0 : 1.0 / (1.0 - p));
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

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("normal_", &normal_i);
	m.impl("uniform_", &uniform_i);
	m.impl("bernoulli_.float", &bernoulli_fi);
	m.impl("random_", &random_i);
	m.impl("random_.to", &random_to_i);
	m.impl("random_.from", &random_from_i);
	m.impl("native_dropout", &native_dropout);
	m.impl("native_dropout_backward", &native_dropout_backward);
}

} // namespace torch_neuron
