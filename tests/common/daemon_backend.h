// Which backend the neurond under test runs. The QEMU suite runs the same daemon and
// sharing suites against --backend kmd, where a test of an emu-only feature skips.
#pragma once

#include <neuron/neuron.h>

#include <cstring>

namespace neuron::test {

// True if device 0 of the daemon behind `c` reports backend "kmd" (false for emu, or
// if the daemon cannot be asked: the test then fails at its first real call).
inline bool daemon_runs_kmd(neuron_client *c)
{
	struct neuron_device_info info = {};
	return neuron_device_info(c, 0, &info) == NEURON_OK && std::strcmp(info.backend, "kmd") == 0;
}

} // namespace neuron::test
