// A control-plane client for the admin tools (neuronctl, neuron-top): speaks
// contracts/neuron.proto directly, because the capacity API (pools, loans, policy, the
// event stream) is for operators and not part of libneuron's tenant API. Connects as
// an observer, so the tool is never listed as a tenant. One thread; blocking.
#pragma once

#include <neuron.pb.h>
#include <wire.h>

#include <deque>
#include <functional>
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
	// Once subscribed to events (a SubscribeEvents answered Ok through call()), a
	// lost connection is made again (neurond restarted: README "Restart with
	// tenants alive"): connect, subscribe again with replay (the new neurond's
	// backlog, all of it newer than the restart), and the next frame is an
	// "events.lost" marker with lost 0 (unknown) saying events may be missing,
	// before the new neurond's events. It waits for neurond up to
	// $NEURON_RECONNECT_TIMEOUT_MS (60 s) before giving up with *error.
	bool receive(api::Response *resp, int timeout_ms, std::string *error);
	// While waiting for neurond to come back, receive() gives up (false, *error
	// set) as soon as `stop` returns true (a tool shutting down).
	void stop_when(std::function<bool()> stop) { stop_ = std::move(stop); }
	// Every tenant, page after page (ListTenants is paged). False on a transport
	// failure (*error) or a daemon-side error (*error says it).
	bool list_tenants(api::ListTenantsReply *out, std::string *error);
	const std::string &path() const { return path_; }

private:
	// Connected again and subscribed again after a lost connection; *marker the
	// events.lost frame to hand out. False with *error.
	bool resubscribe(api::Response *marker, std::string *error);
	int fd_ = -1;
	std::string name_;
	bool subscribed_ = false; // a SubscribeEvents was answered Ok
	bool in_call_ = false;    // call() reads its answer: no resubscription under it
	std::function<bool()> stop_;
	uint64_t next_id_ = 1;
	std::string path_;
	wire::FrameDecoder decoder_;
};

// "ERROR_PERMISSION_DENIED: message" for a failed response.
std::string describe_error(const api::Error &e);

} // namespace neuron::tools
