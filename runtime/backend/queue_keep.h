// Restart survival of one queue (daemon/README.md, "Commands in flight"): what a
// new neurond needs to continue a queue exactly where the old one stopped, kept
// in memory that outlives neurond (memfds its supervisor holds).
//
//  - QueueProgress, one record per queue in the kept progress memfd: the
//    authoritative completed count (stored before the ring's report), the first
//    slot of the command whose tiles began (`started`), and the sticky fault.
//  - UndoLog, the queue's kept undo memfd: before the first tile of a command that
//    cannot simply run again (it reads what it writes: in place, accumulating, a
//    matmul with beta, an optimizer step), the bytes of its written operands.
//
// The rule: a command with started > completed was interrupted. A new neurond
// puts its written operands back from the undo record (if it has one for that
// command), then runs it again from the start, so it completes exactly once;
// commands that have no undo record were pure (their outputs a function of inputs
// they do not write), so running them again gives the same bytes.
//
// Threads: the engine that runs the queue writes both (one at a time: the
// logical core's claim); the control thread reads them only at adoption, before
// the engines start.
#pragma once

#include <gate/admit.h>
#include <neuron/cmd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace neuron::backend {

class TenantMemory;

struct QueueProgress {
	uint64_t queue_id;  // 0: a free record
	uint64_t completed; // ring slots completed
	uint64_t started;   // first slot of the command whose tiles began
	uint32_t faulted;   // 1 once the queue faulted
	// A buffer the backend made for the command in flight (kmd: the handle of its
	// chain-state BO in the tenant's driver file), or 0. Set after it is made and
	// cleared before it is freed. A new neurond frees it with every other buffer
	// the journal does not name (TenantContext::close_unclaimed); this record only
	// lets its log say which command's buffer it was.
	uint32_t scratch;
	uint64_t pad1[4];
};
static_assert(sizeof(QueueProgress) == 64);

// True if running `cmd` again from its start after a partial run gives the bytes
// one complete run gives: its written operands are disjoint from every operand it
// reads, and the op overwrites its outputs without reading them.
bool rerun_is_exact(const neuron_cmd &cmd, const gate::Operands &ops);

class TenantContext;

class UndoLog {
public:
	static constexpr int kMaxRanges = NEURON_MAX_OPERANDS;
	// A record of a program replay (save_device) holds at most this many ranges
	// (what fits the record's 4 KiB header).
	static constexpr int kMaxSavedRanges = 160;
	// fd: the queue's undo memfd (owned from here on), or -1 (no undo: every
	// command that is not rerun_is_exact then faults after a restart).
	explicit UndoLog(int fd);
	~UndoLog();
	UndoLog(const UndoLog &) = delete;
	UndoLog &operator=(const UndoLog &) = delete;

	int fd() const { return fd_; }
	// Engine, before the first tile of command `seq`, with the tenant's memory
	// locked: saves the bytes of cmd's written operands. Bytes neurond cannot
	// address (kmd: device memory in driver BOs) are copied by `tenant`'s backend
	// (TenantContext::read_device: the device's DMA). "" or why it could not (the
	// memfd could not grow, the copy failed): the command then must not run.
	std::string save(uint64_t seq, const neuron_cmd &cmd, const gate::Operands &ops, TenantContext &tenant,
			 uint32_t device);
	// The same for a program replay (EXEC_PROGRAM): the device memory it may
	// write (its written arguments as bound, its buffers), each range where the
	// engine sees it (`src`, null where neurond cannot address it). More than
	// kMaxSavedRanges ranges: the record says so, and the replay, if a restart
	// interrupts it, faults instead of running again.
	struct DeviceRange {
		uint64_t addr = 0, bytes = 0;
		const std::byte *src = nullptr;
	};
	std::string save_device(uint64_t seq, const std::vector<DeviceRange> &ranges, TenantContext &tenant,
				uint32_t device);
	// Adoption (no engine runs): if the record is for command `seq`, puts its bytes
	// back into `tenant`'s memory on `device` (through its backend where neurond
	// cannot address it: TenantContext::write_device). NoRecord: it is for another
	// command (`seq` was pure: it runs again as it is); Failed with *why: it
	// cannot be applied.
	enum class Restore { Restored, NoRecord, Failed };
	Restore restore(uint64_t seq, uint32_t device, TenantContext &tenant, std::string *why);

private:
	struct Header;
	// One range of a record: where it lies, and its bytes as neurond sees them
	// (null: the backend copies them).
	struct Source {
		uint8_t mem_space;
		uint32_t host_buffer;
		uint64_t addr, bytes;
		const std::byte *src;
	};
	std::string write_record(uint64_t seq, const std::vector<Source> &ranges, TenantContext &tenant,
				 uint32_t device);
	void mark(uint64_t seq, uint32_t count);
	bool grow(uint64_t bytes);

	int fd_ = -1;
	void *map_ = nullptr;
	uint64_t mapped_ = 0;
};

} // namespace neuron::backend
