#include "internal.h"

#include <string>

namespace neuron::client {

static thread_local std::string t_last_error = "no error";

neuron_status fail(neuron_status status, const std::string &message)
{
	t_last_error = message;
	return status;
}

} // namespace neuron::client

extern "C" const char *neuron_last_error(void) { return neuron::client::t_last_error.c_str(); }

extern "C" const char *neuron_status_name(neuron_status s)
{
	switch (s) {
	case NEURON_OK: return "NEURON_OK";
	case NEURON_ERR_INVALID: return "NEURON_ERR_INVALID";
	case NEURON_ERR_NO_MEMORY: return "NEURON_ERR_NO_MEMORY";
	case NEURON_ERR_NOT_FOUND: return "NEURON_ERR_NOT_FOUND";
	case NEURON_ERR_PERMISSION: return "NEURON_ERR_PERMISSION";
	case NEURON_ERR_VERSION: return "NEURON_ERR_VERSION";
	case NEURON_ERR_DAEMON_LOST: return "NEURON_ERR_DAEMON_LOST";
	case NEURON_ERR_TIMEOUT: return "NEURON_ERR_TIMEOUT";
	case NEURON_ERR_FAULT: return "NEURON_ERR_FAULT";
	case NEURON_ERR_PROTOCOL: return "NEURON_ERR_PROTOCOL";
	case NEURON_ERR_INTERNAL: return "NEURON_ERR_INTERNAL";
	case NEURON_ERR_ABORTED: return "NEURON_ERR_ABORTED";
	}
	return "NEURON_ERR_UNKNOWN";
}
