#include "state_journal.h"

#include "fd_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace neuron::daemon {

namespace {

constexpr uint64_t kMagic = 0x4c4e524a444e524eull; // "NRNDJRNL"
constexpr uint64_t kHeaderBytes = 4096;

uint64_t fnv1a(const std::string &bytes)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (unsigned char c : bytes)
		h = (h ^ c) * 0x100000001b3ull;
	return h;
}

int kept_or_new(FdStore &store, const std::string &name, uint64_t size)
{
	if (int fd = store.take(name); fd >= 0)
		return fd;
	const int fd = memfd_create(("neuron-" + name).c_str(), MFD_CLOEXEC);
	if (fd < 0)
		throw std::runtime_error("memfd_create for the state " + name + ": " + std::strerror(errno));
	if (size && ftruncate(fd, static_cast<off_t>(size)) != 0) {
		close(fd);
		throw std::runtime_error("cannot size the state " + name + ": " + std::strerror(errno));
	}
	if (auto err = store.store(name, fd); !err.empty()) {
		close(fd);
		throw std::runtime_error("cannot keep the state " + name + " with the supervisor: " + err);
	}
	return fd;
}

bool read_at(int fd, void *p, size_t n, uint64_t off)
{
	return pread(fd, p, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

bool write_at(int fd, const void *p, size_t n, uint64_t off)
{
	return pwrite(fd, p, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

} // namespace

struct StateJournal::Header {
	uint64_t magic;
	uint32_t layout;
	uint32_t active; // 0 or 1: which copy is current (one aligned word: flips atomically)
	uint64_t offset[2];
	uint64_t capacity[2];
	uint64_t length[2];
	uint64_t hash[2];
};

StateJournal::StateJournal(FdStore &store)
{
	journal_fd_ = kept_or_new(store, "journal", 0);
	const uint64_t bytes = uint64_t(kProgressSlots) * sizeof(backend::QueueProgress);
	progress_fd_ = kept_or_new(store, "progress", bytes);
	struct stat st;
	if (fstat(progress_fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != bytes)
		throw std::runtime_error("the kept progress memfd has the wrong size");
	void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, progress_fd_, 0);
	if (p == MAP_FAILED)
		throw std::runtime_error(std::string("cannot map the progress memfd: ") + std::strerror(errno));
	progress_ = static_cast<backend::QueueProgress *>(p);
	used_.assign(kProgressSlots, false);
	adopt_progress({});
}

StateJournal::~StateJournal()
{
	munmap(progress_, uint64_t(kProgressSlots) * sizeof(backend::QueueProgress));
	close(progress_fd_);
	close(journal_fd_);
}

std::optional<state::Daemon> StateJournal::load(std::string *why) const
{
	Header h = {};
	if (!read_at(journal_fd_, &h, sizeof(h), 0) || h.magic != kMagic)
		return std::nullopt; // never written: a fresh start
	const uint32_t i = h.active & 1;
	std::string bytes(h.length[i], '\0');
	if (h.layout != 1 || !read_at(journal_fd_, bytes.data(), bytes.size(), h.offset[i]) || fnv1a(bytes) != h.hash[i]) {
		*why = "the kept state journal is damaged (layout " + std::to_string(h.layout) + ")";
		return std::nullopt;
	}
	state::Daemon d;
	if (!d.ParseFromString(bytes)) {
		*why = "the kept state journal does not parse";
		return std::nullopt;
	}
	return d;
}

std::string StateJournal::save(const state::Daemon &snapshot)
{
	std::string bytes;
	snapshot.SerializeToString(&bytes);
	Header h = {};
	if (!read_at(journal_fd_, &h, sizeof(h), 0) || h.magic != kMagic)
		h = Header{kMagic, 1, 1, {0, 0}, {0, 0}, {0, 0}, {fnv1a({}), fnv1a({})}};
	const uint32_t cur = h.active & 1, next = cur ^ 1;
	// The other copy goes into its own place if that is large enough, else after
	// both (the memfd grows, with room to spare: at most ~4x the largest snapshot).
	if (h.capacity[next] < bytes.size()) {
		h.offset[next] = std::max({kHeaderBytes, h.offset[cur] + h.capacity[cur], h.offset[next] + h.capacity[next]});
		h.capacity[next] = 2 * bytes.size() + 4096;
	}
	const uint64_t off = h.offset[next];
	if (!write_at(journal_fd_, bytes.data(), bytes.size(), off))
		return std::string("cannot write the state journal: ") + std::strerror(errno);
	h.offset[next] = off;
	h.length[next] = bytes.size();
	h.hash[next] = fnv1a(bytes);
	// The inactive copy's fields first, then the flip (one 4-byte write).
	if (!write_at(journal_fd_, &h, sizeof(h), 0))
		return std::string("cannot write the state journal header: ") + std::strerror(errno);
	h.active = next;
	if (!write_at(journal_fd_, &h.active, sizeof(h.active), offsetof(Header, active)))
		return std::string("cannot flip the state journal: ") + std::strerror(errno);
	return {};
}

backend::QueueProgress *StateJournal::claim_progress(uint32_t *slot)
{
	std::lock_guard lock(slots_mutex_);
	if (free_slots_.empty())
		return nullptr;
	*slot = free_slots_.back();
	free_slots_.pop_back();
	used_[*slot] = true;
	return &progress_[*slot];
}

backend::QueueProgress *StateJournal::progress(uint32_t slot) const
{
	return slot < kProgressSlots ? &progress_[slot] : nullptr;
}

void StateJournal::release_progress(uint32_t slot)
{
	std::lock_guard lock(slots_mutex_);
	if (slot >= kProgressSlots || !used_[slot])
		return;
	used_[slot] = false;
	progress_[slot] = backend::QueueProgress{};
	free_slots_.push_back(slot);
}

void StateJournal::adopt_progress(const std::vector<uint32_t> &used)
{
	std::lock_guard lock(slots_mutex_);
	std::fill(used_.begin(), used_.end(), false);
	for (uint32_t s : used)
		if (s < kProgressSlots)
			used_[s] = true;
	free_slots_.clear();
	for (uint32_t s = kProgressSlots; s-- > 0;)
		if (!used_[s])
			free_slots_.push_back(s);
}

} // namespace neuron::daemon
