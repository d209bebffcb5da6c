#include "admin.h"

#include <fstream>
#include <grp.h>
#include <sstream>

namespace neuron::daemon {

bool peer_in_group(const Peer &peer, gid_t gid)
{
	if (peer.gid == gid)
		return true;
	std::ifstream status("/proc/" + std::to_string(peer.pid) + "/status");
	std::string line;
	while (std::getline(status, line)) {
		if (line.rfind("Groups:", 0) != 0)
			continue;
		std::istringstream in(line.substr(7));
		long g;
		while (in >> g)
			if (static_cast<gid_t>(g) == gid)
				return true;
	}
	return false;
}

bool peer_is_admin(const Peer &peer, const std::string &admin_group)
{
	if (peer.uid == 0)
		return true;
	const struct group *g = getgrnam(admin_group.c_str());
	return g && peer_in_group(peer, g->gr_gid);
}

std::string admin_refusal(const std::string &what, const Peer &peer, const std::string &admin_group)
{
	return what + " is an admin call: it needs root or membership in group '" + admin_group + "', and uid " +
	       std::to_string(peer.uid) + " has neither (add the user to the group, e.g. `usermod -aG " + admin_group +
	       " USER`, and log in again, or use sudo)";
}

} // namespace neuron::daemon
