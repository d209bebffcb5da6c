// The neuron device generator: Philox state (seed, offset), as CUDA's. The
// numbers themselves are drawn on the chip (ISA 1.4's RNG ops, cmd.h): each
// random op takes the generator's (seed, offset) and advances the offset by one,
// so the same seed gives the same numbers on every run, whatever the tiling.
// The state lives on the host: seeding or reading it never touches the device
// (torch.manual_seed in a CPU-only program does not connect to neurond).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>

#include <optional>

namespace torch_neuron {

struct PhiloxDraw {
	uint64_t seed;
	uint64_t offset;
};

class NeuronGenerator final : public c10::GeneratorImpl {
public:
	// PyTorch's default seed, so an unseeded program is reproducible too.
	static constexpr uint64_t kDefaultSeed = 67280421310721ull;
	static constexpr size_t kStateBytes = 16; // seed, offset (little-endian u64 each)

	explicit NeuronGenerator(c10::DeviceIndex index, uint64_t seed = kDefaultSeed);

	void set_current_seed(uint64_t seed) override;
	void set_offset(uint64_t offset) override { offset_ = offset; }
	uint64_t get_offset() const override { return offset_; }
	uint64_t current_seed() const override { return seed_; }
	uint64_t seed() override;
	void set_state(const c10::TensorImpl &state) override;
	c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
	static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

	// The (seed, offset) of the next command, advancing the offset. Call with the
	// generator's mutex held.
	PhiloxDraw next() { return {seed_, offset_++}; }

private:
	NeuronGenerator *clone_impl() const override;
	uint64_t seed_;
	uint64_t offset_ = 0;
};

// Device `index`'s default generator (index -1: the current device); created on
// first use, without connecting to neurond.
const at::Generator &default_generator(c10::DeviceIndex index);

// The draw for one random command: from gen if given (it must be a neuron
// generator), else the default generator of `device`'s index.
PhiloxDraw next_draw(const std::optional<at::Generator> &gen, c10::Device device);

} // namespace torch_neuron
