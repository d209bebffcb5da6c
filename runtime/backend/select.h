// Which device backend neurond runs on (its --backend flag): "emu" builds the
// simulated chip in this process, "kmd" opens the nodes of driver neuron and fails
// with the reason if there are none or they cannot be used, "auto" takes kmd when a
// node opens and emu otherwise. The choice and its reason are logged once.
#pragma once

#include "device_backend.h"

#include <memory>
#include <string>
#include <vector>

namespace neuron::backend {

struct BackendOptions {
	std::string kind = "emu"; // emu, kmd, auto
	// emu only (kmd: the driver's module parameters decide; a mismatch is logged).
	std::string profile = "trn2";
	uint32_t devices = 1;
	uint32_t cores = 0;   // 0: the profile's
	uint64_t hbm_mib = 0; // 0: the profile's
	// Restart survival (daemon/README.md): device memory in memfds that neurond
	// keeps with its supervisor (emu). kept_hbm: the memfd each device's HBM had
	// under the neurond before this one, or -1 (a fresh one); taken over.
	bool keep_hbm = false;
	std::vector<int> kept_hbm;
	EngineSettings engines;
};

struct Selected {
	std::unique_ptr<DeviceBackend> backend;
	std::string reason;  // why this backend ("--backend emu", "auto: /dev/accel/accel0 is driver neuron", ...)
	std::string warning; // options that do not apply to it, or empty
};

// Throws std::runtime_error with a readable reason when the requested backend
// cannot be built.
Selected open_backend(const BackendOptions &options);

} // namespace neuron::backend
