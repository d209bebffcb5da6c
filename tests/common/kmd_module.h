// For suites that run against neurond --backend kmd in the QEMU guest: with the kmd
// backend the device geometry (devices, cores, HBM, profile) comes from neuron.ko's
// module parameters, not from neurond's flags, so before a daemon starts the module
// is reloaded to match the flags the test gave it. Active only when
// $NEURON_TEST_KMD_MODULE names the module file (tests/driver/guest-init-daemon.sh
// sets it); $NEURON_TEST_KMD_MODULE_ARGS adds parameters (e.g. job_timeout_ms).
#pragma once

#include <string>
#include <vector>

namespace neuron::test {

// Reloads the module if its parameters differ from what `settings` (neurond flags)
// ask for. True when nothing was needed or the reload worked; false with *error.
bool match_kmd_module(const std::vector<std::string> &settings, std::string *error);

} // namespace neuron::test
