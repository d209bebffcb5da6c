// neuron-top's data: two consecutive samples of neurond's state (devices, capacity,
// tenants), from which rates are derived (core utilisation = busy time over wall
// time between samples, tenant ops/s = commands completed over it).
#pragma once

#include <ctl_client.h>

#include <neuron.pb.h>

#include <cstdint>
#include <map>
#include <string>

namespace neuron::top {

struct Sample {
	uint64_t at_ns = 0;
	api::ListDevicesReply devices;
	api::CapacityReply capacity;
	api::ListTenantsReply tenants;
};

struct Model {
	Sample prev, cur;
	bool have_prev = false;

	// Fetches a new sample (the current one becomes the previous). False + *error.
	bool refresh(tools::CtlClient &client, std::string *error);
	// Busy fraction of a core between the two samples (0..1).
	double utilisation(uint32_t device, uint32_t core) const;
	double ops_per_s(uint64_t tenant) const;
	static uint64_t commands(const api::TenantInfo &t);
	static uint64_t memory(const api::TenantInfo &t);
	const api::TenantInfo *tenant(uint64_t id) const;
};

} // namespace neuron::top
