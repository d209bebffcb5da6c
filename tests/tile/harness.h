// Running tile programs in the tests: HBM arguments as host buffers filled from
// doubles (ref.h's independent dtype conversions), validation that must pass,
// and the whole program or one step at a time.
#pragma once

#include "../kernels/ref.h"
#include "builder.h"

#include <tile/execution.h>
#include <tile/program.h>

#include <chip/profile.h>

#include <memory>
#include <string>
#include <vector>

namespace th {


struct Arg {
	int dtype;
	std::vector<std::byte> bytes;
	Arg(int dt, size_t n) : dtype(dt), bytes(n * ref::esize(dt)) {}
	size_t size() const { return bytes.size() / ref::esize(dtype); }
	double get(size_t i) const { return ref::decode(dtype, bytes.data() + i * ref::esize(dtype)); }
	void set(size_t i, double v) { ref::encode(dtype, bytes.data() + i * ref::esize(dtype), v); }
	void fill_random(ref::Rng &rng, double lo = -1, double hi = 1)
	{
		for (size_t i = 0; i < size(); ++i)
			set(i, rng.uniform(lo, hi));
	}
};

inline neuron::chip::OnChip onchip(const char *profile = "trn2")
{
	return neuron::chip::find_profile(profile)->onchip;
}

inline std::vector<uint64_t> sizes_of(const std::vector<Arg> &args)
{
	std::vector<uint64_t> s;
	for (const Arg &a : args)
		s.push_back(a.bytes.size());
	return s;
}

// Validates (the test fails with the validator's message if it refuses).
inline std::shared_ptr<const neuron::tile::TileProgram> validated(const std::vector<neuron_tile_insn> &insns,
								   const std::vector<Arg> &args,
								   const char *profile = "trn2")
{
	auto p = std::make_shared<neuron::tile::TileProgram>();
	const std::string why = neuron::tile::validate(onchip(profile), sizes_of(args), insns, p.get());
	cr_assert(why.empty(), "validation refused the program: %s", why.c_str());
	return p;
}

// The validator's refusal ("" if it accepted).
inline std::string refusal(const std::vector<neuron_tile_insn> &insns, const std::vector<uint64_t> &arg_bytes,
			   const char *profile = "trn2")
{
	neuron::tile::TileProgram p;
	return neuron::tile::validate(onchip(profile), arg_bytes, insns, &p);
}

inline std::vector<std::byte *> pointers(std::vector<Arg> &args)
{
	std::vector<std::byte *> ptrs;
	for (Arg &a : args)
		ptrs.push_back(a.bytes.data());
	return ptrs;
}

inline void run(const std::vector<neuron_tile_insn> &insns, std::vector<Arg> &args, const char *profile = "trn2")
{
	auto p = validated(insns, args, profile);
	auto ptrs = pointers(args);
	neuron::tile::run(p, ptrs);
}

inline void expect_contains(const std::string &s, const char *part)
{
	cr_expect(s.find(part) != std::string::npos, "expected \"%s\" in: %s", part, s.c_str());
}

} // namespace th
