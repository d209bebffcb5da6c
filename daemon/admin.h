// Who may make admin calls (lend, reclaim, policy, pool limits): root, or a member
// of the admin group (default neuron-admin). Decided once per connection from
// SO_PEERCRED (uid, gid) and the peer's supplementary groups as the kernel reports
// them in /proc/<pid>/status at connect time; never from anything in a message.
#pragma once

#include "tenant.h"

#include <string>

namespace neuron::daemon {

bool peer_is_admin(const Peer &peer, const std::string &admin_group);
// Whether the peer's primary or supplementary groups (at connect) include gid.
bool peer_in_group(const Peer &peer, gid_t gid);

// The error text a refused admin call gets.
std::string admin_refusal(const std::string &what, const Peer &peer, const std::string &admin_group);

} // namespace neuron::daemon
