#include "queue_keep.h"

#include "tenant_memory.h"

#include <geometry.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace neuron::backend {

namespace {

bool overlaps(const neuron_tensor_desc &da, uint64_t ka, uint64_t na, const neuron_tensor_desc &db, uint64_t kb,
	      uint64_t nb)
{
	if (na == 0 || nb == 0 || da.mem_space != db.mem_space || da.host_buffer != db.host_buffer)
		return false;
	return ka < kb + nb && kb < ka + na;
}

} // namespace

bool rerun_is_exact(const neuron_cmd &cmd, const gate::Operands &ops)
{
	if (!kernels::overwrites_outputs(cmd))
		return false;
	const int n = cmd.num_operands, written = kernels::written_operands(cmd.opcode);
	for (int w = 0; w < written && w < n; ++w)
		for (int k = written; k < n; ++k)
			if (overlaps(cmd.operands[w], ops.where[w].key, ops.bytes[w], cmd.operands[k], ops.where[k].key,
				     ops.bytes[k]))
				return false;
	return true;
}

// The undo memfd: this header, then the saved bytes of each range in order.
struct UndoLog::Header {
	uint64_t seq;   // the command the record is for (written last, with valid)
	uint32_t valid; // 0 while a record is being written
	uint32_t count;
	struct Range {
		uint8_t mem_space;
		uint8_t pad[3];
		uint32_t host_buffer;
		uint64_t addr;
		uint64_t bytes;
	} ranges[kMaxSavedRanges];
};

static constexpr uint64_t kHeaderBytes = 4096;
// count of a record that could not be saved (a replay with too many ranges).
static constexpr uint32_t kUnsaved = 0xffffffffu;
// count of a record whose written operands this process cannot read (kmd: they
// lie in driver BOs): the command, if interrupted, faults instead of running again.
static constexpr uint32_t kUnreachable = 0xfffffffeu;

UndoLog::UndoLog(int fd) : fd_(fd)
{
	if (fd_ >= 0)
		grow(kHeaderBytes);
}

UndoLog::~UndoLog()
{
	if (map_)
		munmap(map_, mapped_);
	if (fd_ >= 0)
		close(fd_);
}

bool UndoLog::grow(uint64_t bytes)
{
	if (bytes <= mapped_)
		return true;
	const uint64_t page = 4096, want = (bytes + page - 1) / page * page;
	off_t size = lseek(fd_, 0, SEEK_END);
	if (size < 0)
		return false;
	if (static_cast<uint64_t>(size) < want && ftruncate(fd_, static_cast<off_t>(want)) != 0)
		return false;
	void *p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
	if (p == MAP_FAILED)
		return false;
	if (map_)
		munmap(map_, mapped_);
	map_ = p;
	mapped_ = want;
	return true;
}

std::string UndoLog::save(uint64_t seq, const neuron_cmd &cmd, const gate::Operands &ops)
{
	static_assert(sizeof(Header) <= kHeaderBytes);
	if (fd_ < 0)
		return "the queue has no undo log";
	const int written = std::min<int>(kernels::written_operands(cmd.opcode), cmd.num_operands);
	uint64_t total = kHeaderBytes;
	bool reachable = true;
	for (int w = 0; w < written; ++w) {
		total += ops.bytes[w];
		reachable = reachable && (ops.where[w].data || !ops.bytes[w]);
	}
	if (!grow(reachable ? total : kHeaderBytes))
		return "cannot grow the queue's undo log to " + std::to_string(total) + " bytes";
	auto *h = static_cast<Header *>(map_);
	if (!reachable) {
		// Only the mark: restore() then says why this command cannot run again.
		std::atomic_ref<uint32_t>(h->valid).store(0, std::memory_order_release);
		h->count = kUnreachable;
		h->seq = seq;
		std::atomic_ref<uint32_t>(h->valid).store(1, std::memory_order_release);
		return {};
	}
	std::atomic_ref<uint32_t>(h->valid).store(0, std::memory_order_release);
	auto *out = static_cast<std::byte *>(map_) + kHeaderBytes;
	h->count = static_cast<uint32_t>(written);
	for (int w = 0; w < written; ++w) {
		const neuron_tensor_desc &d = cmd.operands[w];
		h->ranges[w] = {d.mem_space, {}, d.host_buffer, d.addr, ops.bytes[w]};
		if (ops.bytes[w])
			std::memcpy(out, ops.where[w].data, ops.bytes[w]);
		out += ops.bytes[w];
	}
	h->seq = seq;
	std::atomic_ref<uint32_t>(h->valid).store(1, std::memory_order_release);
	return {};
}

std::string UndoLog::save_device(uint64_t seq, const std::vector<DeviceRange> &ranges)
{
	if (fd_ < 0)
		return "the queue has no undo log";
	bool saveable = ranges.size() <= size_t(kMaxSavedRanges);
	uint64_t total = kHeaderBytes;
	for (const DeviceRange &r : ranges) {
		total += r.bytes;
		saveable = saveable && (r.src || !r.bytes);
	}
	if (saveable && !grow(total))
		return "cannot grow the queue's undo log to " + std::to_string(total) + " bytes";
	auto *h = static_cast<Header *>(map_);
	std::atomic_ref<uint32_t>(h->valid).store(0, std::memory_order_release);
	h->count = saveable ? static_cast<uint32_t>(ranges.size()) : kUnsaved;
	auto *out = static_cast<std::byte *>(map_) + kHeaderBytes;
	for (size_t i = 0; saveable && i < ranges.size(); ++i) {
		h->ranges[i] = {NEURON_MEM_DEVICE, {}, 0, ranges[i].addr, ranges[i].bytes};
		if (ranges[i].bytes)
			std::memcpy(out, ranges[i].src, ranges[i].bytes);
		out += ranges[i].bytes;
	}
	h->seq = seq;
	std::atomic_ref<uint32_t>(h->valid).store(1, std::memory_order_release);
	return {};
}

UndoLog::Restore UndoLog::restore(uint64_t seq, uint32_t device, TenantMemory &memory, std::string *why)
{
	if (fd_ < 0 || !map_)
		return Restore::NoRecord;
	const auto *h = static_cast<const Header *>(map_);
	if (!h->valid || h->seq != seq)
		return Restore::NoRecord;
	if (h->count == kUnsaved) {
		*why = "the program replay writes more memory ranges than its undo record holds (" +
		       std::to_string(kMaxSavedRanges) + ")";
		return Restore::Failed;
	}
	if (h->count == kUnreachable) {
		*why = "it writes memory it also reads, and this backend's device memory lies where neurond cannot "
		       "save it before the command (driver buffers: the undo log works on --backend emu only)";
		return Restore::Failed;
	}
	if (h->count > kMaxSavedRanges) {
		*why = "the undo record is damaged";
		return Restore::Failed;
	}
	uint64_t total = kHeaderBytes;
	for (uint32_t i = 0; i < h->count; ++i)
		total += h->ranges[i].bytes;
	if (!grow(total)) {
		*why = "the undo record is cut short";
		return Restore::Failed;
	}
	h = static_cast<const Header *>(map_);
	const auto *in = static_cast<const std::byte *>(map_) + kHeaderBytes;
	auto lock = memory.lock_exclusive();
	for (uint32_t i = 0; i < h->count; ++i) {
		const auto &r = h->ranges[i];
		std::byte *dst = nullptr;
		if (r.mem_space == NEURON_MEM_DEVICE) {
			uint64_t start = 0;
			if (const DeviceAllocation *a = memory.find_device(device, r.addr, r.bytes, &start); a && a->host)
				dst = a->host + (r.addr - start);
		} else if (const HostRegion *hr = memory.host(r.host_buffer); hr && r.addr + r.bytes <= hr->size) {
			dst = hr->host + r.addr;
		}
		if (!dst && r.bytes) {
			*why = "operand " + std::to_string(i) + " of command " + std::to_string(seq) +
			       " no longer lies in the tenant's memory";
			return Restore::Failed;
		}
		if (r.bytes)
			std::memcpy(dst, in, r.bytes);
		in += r.bytes;
	}
	return Restore::Restored;
}

} // namespace neuron::backend
