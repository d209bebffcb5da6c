#include "fd_store.h"

#include "listen_fds.h"
#include "sd_notify.h"

#include <unistd.h>

namespace neuron::daemon {

FdStore::FdStore(bool enabled) : enabled_(enabled)
{
	if (!enabled_)
		return;
	const auto &fds = listen_fds();
	const auto &names = listen_fd_names();
	for (size_t i = 0; i < fds.size(); ++i)
		if (i < names.size() && names[i].rfind(kPrefix, 0) == 0)
			inherited_.emplace(names[i].substr(kPrefix.size()), fds[i]);
}

int FdStore::take(const std::string &name)
{
	std::lock_guard lock(mutex_);
	auto it = inherited_.find(name);
	if (it == inherited_.end())
		return -1;
	const int fd = it->second;
	inherited_.erase(it);
	return fd;
}

std::map<std::string, int> FdStore::peek(const std::string &prefix) const
{
	std::lock_guard lock(mutex_);
	std::map<std::string, int> out;
	for (auto it = inherited_.lower_bound(prefix); it != inherited_.end() && it->first.rfind(prefix, 0) == 0; ++it)
		out.insert(*it);
	return out;
}

std::string FdStore::store(const std::string &name, int fd)
{
	if (!enabled_)
		return {};
	std::string err;
	if (!sd_notify_with_fd("FDSTORE=1\nFDPOLL=0\nFDNAME=" + kPrefix + name, fd, &err))
		return err;
	return {};
}

void FdStore::remove(const std::string &name)
{
	if (enabled_)
		sd_notify_state("FDSTOREREMOVE=1\nFDNAME=" + kPrefix + name);
}

void FdStore::forget_unclaimed()
{
	std::lock_guard lock(mutex_);
	for (const auto &[name, fd] : inherited_) {
		// Not listening sockets: those belong to the socket unit (or the supervisor).
		sd_notify_state("FDSTOREREMOVE=1\nFDNAME=" + kPrefix + name);
		close(fd);
	}
	inherited_.clear();
}

} // namespace neuron::daemon
