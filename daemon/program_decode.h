// RegisterProgram's Program message (contracts/neuron.proto) into the runtime's
// description of a program (runtime/program/validate.h): field ranges only; what
// the program means is validate()'s to check. Pure; used by the daemon's
// RegisterProgram and by the fuzz-program target (tests/fuzz), which feeds it
// hostile messages.
#pragma once

#include <program/validate.h>

#include <neuron.pb.h>

#include <string>

namespace neuron::daemon {

// "" and *out filled, or what is wrong with the message (naming the node and operand).
std::string decode_program(const api::Program &p, program::Description *out);

} // namespace neuron::daemon
