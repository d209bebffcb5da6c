// Queries: devices and tenants.
#include "internal.h"

#include <algorithm>
#include <cstring>

using namespace neuron;
using neuron::client::call;
using neuron::client::fail;

namespace {

template <size_t N> void copy_str(char (&dst)[N], const std::string &src)
{
	const size_t n = std::min(src.size(), N - 1);
	std::memcpy(dst, src.data(), n);
	dst[n] = '\0';
}

neuron_status list_devices(neuron_client *c, api::ListDevicesReply *out)
{
	api::Request req;
	req.mutable_list_devices();
	api::Response resp;
	if (neuron_status s = call(c, req, &resp); s != NEURON_OK)
		return s;
	*out = resp.list_devices();
	return NEURON_OK;
}

} // namespace

extern "C" neuron_status neuron_device_count(neuron_client *c, uint32_t *count)
{
	if (!c || !count)
		return fail(NEURON_ERR_INVALID, "neuron_device_count: arguments must not be NULL");
	api::ListDevicesReply r;
	if (neuron_status s = list_devices(c, &r); s != NEURON_OK)
		return s;
	*count = static_cast<uint32_t>(r.devices_size());
	return NEURON_OK;
}

extern "C" neuron_status neuron_device_info(neuron_client *c, uint32_t device, struct neuron_device_info *info)
{
	if (!c || !info)
		return fail(NEURON_ERR_INVALID, "neuron_device_info: arguments must not be NULL");
	api::ListDevicesReply r;
	if (neuron_status s = list_devices(c, &r); s != NEURON_OK)
		return s;
	if (device >= static_cast<uint32_t>(r.devices_size()))
		return fail(NEURON_ERR_NOT_FOUND, "device " + std::to_string(device) + " does not exist (" +
							  std::to_string(r.devices_size()) + " devices)");
	const api::DeviceInfo &d = r.devices(static_cast<int>(device));
	*info = {};
	info->index = d.index();
	info->core_count = d.core_count();
	info->hbm_bytes = d.hbm_bytes();
	info->hbm_used_bytes = d.hbm_used_bytes();
	info->hbm_largest_free_bytes = d.hbm_largest_free_bytes();
	info->numa_node = d.numa_node();
	info->connected_count = static_cast<uint32_t>(std::min(d.connected_devices_size(), 16));
	for (uint32_t i = 0; i < info->connected_count; ++i)
		info->connected[i] = d.connected_devices(static_cast<int>(i));
	copy_str(info->profile, d.profile());
	copy_str(info->pci_bdf, d.pci_bdf());
	copy_str(info->backend, d.backend());
	return NEURON_OK;
}

extern "C" neuron_status neuron_list_tenants(neuron_client *c, struct neuron_tenant_info *tenants, uint32_t capacity,
					     uint32_t *count)
{
	if (!c || !count || (capacity && !tenants))
		return fail(NEURON_ERR_INVALID, "neuron_list_tenants: arguments must not be NULL");
	// The daemon pages long lists (one frame holds a bounded number of tenants).
	google::protobuf::RepeatedPtrField<api::TenantInfo> list;
	uint64_t after = 0;
	do {
		api::Request req;
		req.mutable_list_tenants()->set_start_after(after);
		api::Response resp;
		if (neuron_status s = call(c, req, &resp); s != NEURON_OK)
			return s;
		for (const auto &t : resp.list_tenants().tenants())
			*list.Add() = t;
		after = resp.list_tenants().next_start_after();
	} while (after != 0);
	*count = static_cast<uint32_t>(list.size());
	for (uint32_t i = 0; i < std::min(capacity, *count); ++i) {
		const api::TenantInfo &t = list[static_cast<int>(i)];
		neuron_tenant_info &o = tenants[i];
		o = {};
		o.tenant_id = t.tenant_id();
		o.pid = t.pid();
		o.uid = t.uid();
		o.kind = t.kind() == api::TENANT_KIND_INFERENCE ? NEURON_TENANT_INFERENCE : NEURON_TENANT_TRAINING;
		copy_str(o.command, t.command());
		copy_str(o.client_name, t.client_name());
		o.device_count = static_cast<uint32_t>(std::min(t.usage_size(), 16));
		for (uint32_t k = 0; k < o.device_count; ++k) {
			const api::DeviceUsage &u = t.usage(static_cast<int>(k));
			o.devices[k] = u.device();
			o.memory_bytes[k] = u.memory_bytes();
			for (uint32_t core : u.cores())
				if (core < 32)
					o.core_mask[k] |= 1u << core;
			o.commands_completed += u.commands_completed();
		}
	}
	return NEURON_OK;
}
