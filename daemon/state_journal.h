// The state journal (restart survival, daemon/README.md): two memfds neurond keeps
// with its supervisor.
//  - "journal": the latest snapshot of the tenant table (state.proto), double
//    buffered: a snapshot is written beside the current one and a header word then
//    flips to it, so a neurond killed mid-write leaves the previous one valid.
//  - "progress": one fixed 64-byte record per queue (backend::QueueProgress),
//    written by the engines after every command without a snapshot.
//
// Threads: control thread only (the progress records themselves are the engines'
// once handed to a queue).
#pragma once

#include <backend/queue_keep.h>

#include <state.pb.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace neuron::daemon {

class FdStore;

class StateJournal {
public:
	// Takes the kept memfds from `store` (or makes and keeps new ones). Throws
	// std::runtime_error if a memfd cannot be made or kept.
	explicit StateJournal(FdStore &store);
	~StateJournal();
	StateJournal(const StateJournal &) = delete;
	StateJournal &operator=(const StateJournal &) = delete;

	// The snapshot the earlier neurond left (nullopt: none, a fresh start), with
	// *why when one was there but unusable.
	std::optional<state::Daemon> load(std::string *why) const;
	// Writes a snapshot (then it is the one load() returns). "" or the error.
	std::string save(const state::Daemon &snapshot);

	// Progress records: a free one for a new queue (nullptr with all taken), a
	// kept one by its slot, and its slot.
	backend::QueueProgress *claim_progress(uint32_t *slot);
	backend::QueueProgress *progress(uint32_t slot) const;
	void release_progress(uint32_t slot);
	// After adoption: records no adopted queue claimed are free.
	void adopt_progress(const std::vector<uint32_t> &used);

	static constexpr uint32_t kProgressSlots = 65536;

private:
	struct Header;
	std::mutex slots_mutex_; // claim (control thread) vs release (whoever drops a queue last)
	int journal_fd_ = -1;
	int progress_fd_ = -1;
	backend::QueueProgress *progress_ = nullptr;
	std::vector<uint32_t> free_slots_;
	std::vector<bool> used_;
};

} // namespace neuron::daemon
