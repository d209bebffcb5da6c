#include "generator.h"

#include "runtime.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstring>
#include <mutex>

namespace torch_neuron {

namespace {
constexpr int kMaxDev = 16;
}

NeuronGenerator::NeuronGenerator(c10::DeviceIndex index, uint64_t seed)
	: c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
			     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
	  seed_(seed)
{
}

void NeuronGenerator::set_current_seed(uint64_t seed)
{
	seed_ = seed;
	offset_ = 0;
}

uint64_t NeuronGenerator::seed()
{
	const uint64_t s = c10::detail::getNonDeterministicRandom();
	set_current_seed(s);
	return s;
}

void NeuronGenerator::set_state(const c10::TensorImpl &state)
{
	TORCH_CHECK(state.device().is_cpu() && state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
			    static_cast<size_t>(state.numel()) == kStateBytes && state.is_contiguous(),
		    "neuron: an RNG state is a CPU uint8 tensor of ", kStateBytes,
		    " bytes (from torch.neuron.get_rng_state()); got ", state.numel(), " elements of ",
		    state.dtype().name(), " on ", state.device());
	const auto *p = static_cast<const uint8_t *>(state.data());
	std::memcpy(&seed_, p, 8);
	std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGenerator::get_state() const
{
	at::Tensor t = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, c10::kByte, std::nullopt, std::nullopt,
					     std::nullopt, std::nullopt);
	auto *p = t.data_ptr<uint8_t>();
	std::memcpy(p, &seed_, 8);
	std::memcpy(p + 8, &offset_, 8);
	return t.getIntrusivePtr();
}

NeuronGenerator *NeuronGenerator::clone_impl() const
{
	auto *g = new NeuronGenerator(device().index(), seed_);
	g->offset_ = offset_;
	return g;
}

const at::Generator &default_generator(c10::DeviceIndex index)
{
	static std::array<at::Generator, kMaxDev> gens;
	static std::once_flag once[kMaxDev];
	if (index < 0)
		index = static_cast<c10::DeviceIndex>(current_device());
	TORCH_CHECK(index >= 0 && index < kMaxDev, "neuron: bad device index ", index);
	std::call_once(once[index], [&] { gens[index] = at::make_generator<NeuronGenerator>(index); });
	return gens[index];
}

PhiloxDraw next_draw(const std::optional<at::Generator> &gen, c10::Device device)
{
	at::Generator g = gen && gen->defined() ? *gen : default_generator(device.index());
	TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
		    "neuron: a random op on a neuron tensor needs a neuron generator, got one for ", g.device());
	auto *impl = at::check_generator<NeuronGenerator>(g);
	std::lock_guard lock(g.mutex());
	return impl->next();
}

} // namespace torch_neuron
