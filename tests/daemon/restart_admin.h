// Admin calls of the restart suites, through the admin tools' control client
// (tools/common/ctl_client.h: it re-attaches by itself across a restart).
#pragma once

#include "daemon_test.h"

#include <ctl_client.h>

namespace dt {

inline neuron::api::Response admin(neuron::api::Request &req)
{
	neuron::tools::CtlClient c;
	std::string error;
	cr_assert(c.connect(g_daemon->socket_path(), "restart-admin", &error), "%s", error.c_str());
	neuron::api::Response resp;
	cr_assert(c.call(req, &resp, &error), "%s", error.c_str());
	return resp;
}

inline neuron::api::CapacityReply capacity()
{
	neuron::api::Request req;
	req.mutable_get_capacity();
	neuron::api::Response r = admin(req);
	cr_assert(r.has_capacity(), "GetCapacity: %s", r.has_error() ? r.error().message().c_str() : "no reply");
	return r.capacity();
}

} // namespace dt
