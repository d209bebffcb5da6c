// How the kmd backend's checks of a ring command word their faults, shared by
// the ring pump (kmd_pump.cpp) and the DMA-run builder (kmd_dma_run.cpp) so that
// a fault names an operand and an address the same way whichever found it.
#pragma once

#include <fault.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace neuron::daemon::kmd_fault_text {

inline std::string hex(uint64_t v)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

inline kernels::Fault make_fault(uint32_t code, std::string msg) { return kernels::Fault{code, std::move(msg)}; }

// "operand K (output)" or "operand K (input)": operand 0 is the one a COPY writes.
inline std::string who(int k) { return "operand " + std::to_string(k) + (k == 0 ? " (output)" : " (input)"); }

} // namespace neuron::daemon::kmd_fault_text
