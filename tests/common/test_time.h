// How long the integration suites wait for the device before they call it hung.
// The bounds are generous for a host; in the QEMU guest (TCG, the kmd backend) the
// same work takes tens of times longer, so $NEURON_TEST_WAIT_SCALE multiplies them
// (tests/driver/guest-init-daemon.sh sets it). Only "not hung" bounds scale: what a
// test measures (deadlines, latencies) is stated in tile times instead.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace neuron::test {

inline int64_t wait_ns(int64_t host_ns)
{
	static const int64_t scale = [] {
		const char *s = std::getenv("NEURON_TEST_WAIT_SCALE");
		const long v = s ? std::atol(s) : 1;
		return int64_t(v >= 1 ? v : 1);
	}();
	return host_ns * scale;
}

} // namespace neuron::test
