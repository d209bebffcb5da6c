// Where neurond keeps the descriptors that must outlive it (restart survival,
// daemon/README.md): the supervisor's file-descriptor store. Under systemd that is
// the service's fd store (sd_notify(3): FDSTORE=1 with FDNAME=, FDSTOREREMOVE=1;
// the unit needs FileDescriptorStoreMax=); under `neurond --supervise` it is the
// supervisor parent (supervisor.h), which speaks the same protocol. After a
// restart the kept descriptors come back as fds 3.. named by LISTEN_FDNAMES
// (listen_fds.h).
//
// Threads: store() and remove() may be called from any thread (one datagram each);
// take() and forget_unclaimed() on the control thread at start.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace neuron::daemon {

class FdStore {
public:
	// Every name neurond keeps starts with this in the store (the rest of the
	// store is not ours: the socket unit's listening socket).
	static inline const std::string kPrefix = "keep.";

	// enabled: neurond runs with --keep-state (under a supervisor that keeps fds).
	explicit FdStore(bool enabled);
	bool enabled() const { return enabled_; }

	// The kept descriptor called `name` from the earlier neurond, handed over
	// (the caller owns it), or -1.
	int take(const std::string &name);
	// Every kept name that starts with `prefix`.
	std::map<std::string, int> peek(const std::string &prefix) const;
	// Keeps a copy of fd under `name` (replacing nothing: names are unique). ""
	// or why it could not.
	std::string store(const std::string &name, int fd);
	// The store forgets `name` and closes its copy.
	void remove(const std::string &name);
	// Drops every kept descriptor no one took (state of the earlier neurond that
	// the journal does not name: a queue created just before it died).
	void forget_unclaimed();

private:
	bool enabled_;
	mutable std::mutex mutex_;
	std::map<std::string, int> inherited_; // name -> fd, until taken
};

} // namespace neuron::daemon
