// POINTWISE's step program (cmd.h, ISA 1.5): up to 16 steps packed 16 bits each
// into i[0..3]; decoded once per command by the semantic check and the kernel.
#pragma once

#include <neuron/cmd.h>

#include <cstdint>
#include <string>

namespace neuron::kernels {

struct PointwiseStep {
	uint8_t fn = 0;   // enum neuron_pw_fn
	uint8_t a = 0, b = 0; // value ids: inputs 0..4, steps 5.., constants 21..24
};

struct PointwiseSteps {
	int count = 0;
	PointwiseStep step[NEURON_PW_MAX_STEPS];
};

// o[i] = fn(a[i], b[i]) for i < n, in f32 (b is not read for unary functions):
// the formulas of every POINTWISE step, shared with the tile engines
// (runtime/tile). fn is a valid enum neuron_pw_fn other than END.
void pw_eval(uint8_t fn, float *o, const float *a, const float *b, int64_t n);

// Functions that take a second operand.
inline bool pw_binary(uint8_t fn) { return NEURON_PW_FN_IS_BINARY(fn); }

// Steps of cmd with `inputs` input operands; "" or what is wrong (the semantic
// check's wording).
inline std::string decode_steps(const neuron_cmd &cmd, int inputs, PointwiseSteps *out)
{
	out->count = 0;
	bool ended = false;
	for (int s = 0; s < NEURON_PW_MAX_STEPS; ++s) {
		const uint64_t field = (static_cast<uint64_t>(cmd.iscalars[s / 4]) >> (16 * (s % 4))) & 0xffff;
		const uint8_t fn = field & 63, a = (field >> 6) & 31, b = (field >> 11) & 31;
		const std::string who = "step " + std::to_string(s);
		if (ended || fn == NEURON_PW_END) {
			if (field != 0)
				return who + ": comes after the chain ended (a zero function) but is not zero";
			ended = true;
			continue;
		}
		if (fn >= NEURON_PW_FN_COUNT_)
			return who + ": function " + std::to_string(fn) + " is unknown (1.." +
			       std::to_string(NEURON_PW_FN_COUNT_ - 1) + ")";
		auto valid = [&](uint8_t v) {
			return v < inputs || (v >= NEURON_PW_VALUE_STEP0 && v < NEURON_PW_VALUE_STEP0 + s) ||
			       (v >= NEURON_PW_VALUE_CONST0 && v < NEURON_PW_VALUE_CONST0 + NEURON_MAX_SCALARS);
		};
		if (!valid(a))
			return who + ": operand a names value " + std::to_string(a) + ", which is not an input (0.." +
			       std::to_string(inputs - 1) + "), an earlier step (5..) or a constant (21..24)";
		if (pw_binary(fn) ? !valid(b) : b != 0)
			return who + ": operand b (" + std::to_string(b) + ") must " +
			       (pw_binary(fn) ? "name an input, an earlier step or a constant" : "be 0 for a unary function");
		out->step[out->count++] = {fn, a, b};
	}
	if (out->count == 0)
		return "the step program is empty: i[0] must hold at least one step";
	return {};
}

} // namespace neuron::kernels
