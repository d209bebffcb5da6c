// A control-plane client for the admin tools (neuronctl, neuron-top): speaks
// contracts/neuron.proto directly, because the capacity API (pools, loans, policy, the
// event stream) is for operators and not part of libneuron's tenant API. Connects as
// an observer, so the tool is never listed as a tenant. One thread; blocking.
#pragma once

#include <neuron.pb.h>
#include <wire.h>

#include <deque>
#include <string>

namespace neuron::tools {

class CtlClient {
public:
	CtlClient() = default;
	~CtlClient();
	CtlClient(const CtlClient &) = delete;
	CtlClient &operator=(const CtlClient &) = delete;

	// path empty: $NEURON_SOCKET or the default. False with *error (says what to do).
	bool connect(const std::string &path, const std::string &name, std::string *error);
	// One request/response. False on a transport failure (*error); a daemon-side
	// error is resp->error() with true returned.
	bool call(api::Request &req, api::Response *resp, std::string *error);
	// The next pushed frame (events). timeout_ms < 0: no limit. False on timeout
	// (*error empty) or on a lost connection (*error set).
	bool receive(api::Response *resp, int timeout_ms, std::string *error);
	// Every tenant, page after page (ListTenants is paged). False on a transport
	// failure (*error) or a daemon-side error (*error says it).
	bool list_tenants(api::ListTenantsReply *out, std::string *error);
	const std::string &path() const { return path_; }

private:
	int fd_ = -1;
	uint64_t next_id_ = 1;
	std::string path_;
	wire::FrameDecoder decoder_;
};

// "ERROR_PERMISSION_DENIED: message" for a failed response.
std::string describe_error(const api::Error &e);

} // namespace neuron::tools
