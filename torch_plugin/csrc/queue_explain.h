// Why a queue of this process went away on purpose, for the streams that wait on
// it: a stream whose cross-queue wait faults because the queue it waited on was
// destroyed (NEURON_FAULT_BAD_WAIT) reports the reason its owner gave (the signal
// queue of a failed collective, csrc/dist/stream_signal.h). Kept out of runtime.h
// so that the many files including it do not depend on it.
#pragma once

#include <cstdint>
#include <string>

namespace torch_neuron {

void explain_failed_queue(uint64_t queue_id, std::string why);

} // namespace torch_neuron
