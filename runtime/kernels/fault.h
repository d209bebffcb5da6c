// A fault raised while checking or executing a command: the code the queue's
// sticky error state reports (enum neuron_fault_code) and a human-readable reason.
#pragma once

#include <neuron/cmd.h>

#include <cstdint>
#include <string>

namespace neuron::kernels {

struct Fault {
	uint32_t code;       // enum neuron_fault_code
	std::string message; // names the operand and field, and what was expected
};

} // namespace neuron::kernels
