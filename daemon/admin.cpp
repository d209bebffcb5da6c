#include "admin.h"

#include <fstream>
#include <grp.h>
#include <sstream>

namespace neuron::daemon {

bool peer_is_admin(const Peer &peer, const std::string &admin_group)
{
	if (peer.uid == 0)
		return true;
	const struct group *g = getgrnam(admin_group.c_str());
	if (!g)
		return false;
	const gid_t admin = g->gr_gid;
	if (peer.gid == admin)
		return true;
	std::ifstream status("/proc/" + std::to_string(peer.pid) + "/status");
	std::string line;
	while (std::getline(status, line)) {
		if (line.rfind("Groups:", 0) != 0)
			continue;
		std::istringstream in(line.substr(7));
		long gid;
		while (in >> gid)
			if (static_cast<gid_t>(gid) == admin)
				return true;
	}
	return false;
}

std::string admin_refusal(const std::string &what, const Peer &peer, const std::string &admin_group)
{
	return what + " is an admin call: it needs root or membership in group '" + admin_group + "', and uid " +
	       std::to_string(peer.uid) + " has neither (add the user to the group, e.g. `usermod -aG " + admin_group +
	       " USER`, and log in again, or use sudo)";
}

} // namespace neuron::daemon
