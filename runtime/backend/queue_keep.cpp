#include "queue_keep.h"

#include "tenant_context.h"
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
// count of a record whose written host operands this process cannot read: the
// command, if interrupted, faults instead of running again.
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

// Invalidates the record, then marks it as one for command `seq` with `count`
// ranges (a kUnsaved/kUnreachable mark, or the count of a record just written).
void UndoLog::mark(uint64_t seq, uint32_t count)
{
	auto *h = static_cast<Header *>(map_);
	std::atomic_ref<uint32_t>(h->valid).store(0, std::memory_order_release);
	h->count = count;
	h->seq = seq;
	std::atomic_ref<uint32_t>(h->valid).store(1, std::memory_order_release);
}

// The record for command `seq`: the header, then each range's bytes, copied
// here where neurond sees them and by the backend (the device's DMA) where it
// does not. Host ranges neurond cannot see get only the kUnreachable mark.
std::string UndoLog::write_record(uint64_t seq, const std::vector<Source> &ranges, TenantContext &tenant,
				  uint32_t device)
{
	static_assert(sizeof(Header) <= kHeaderBytes);
	if (fd_ < 0)
		return "the queue has no undo log";
	if (ranges.size() > size_t(kMaxSavedRanges)) {
		mark(seq, kUnsaved); // restore() then says why this command cannot run again
		return {};
	}
	uint64_t total = kHeaderBytes;
	bool reachable = true;
	for (const Source &r : ranges) {
		total += r.bytes;
		reachable = reachable && (r.src || !r.bytes || r.mem_space == NEURON_MEM_DEVICE);
	}
	if (!reachable) {
		mark(seq, kUnreachable);
		return {};
	}
	if (!grow(total))
		return "cannot grow the queue's undo log to " + std::to_string(total) + " bytes";
	auto *h = static_cast<Header *>(map_);
	std::atomic_ref<uint32_t>(h->valid).store(0, std::memory_order_release);
	auto *out = static_cast<std::byte *>(map_) + kHeaderBytes;
	std::vector<TenantContext::DeviceBytes> by_device;
	for (size_t i = 0; i < ranges.size(); ++i) {
		const Source &r = ranges[i];
		h->ranges[i] = {r.mem_space, {}, r.host_buffer, r.addr, r.bytes};
		if (r.src && r.bytes)
			std::memcpy(out, r.src, r.bytes);
		else if (r.bytes)
			by_device.push_back({r.addr, r.bytes, out});
		out += r.bytes;
	}
	if (!by_device.empty())
		if (auto refused = tenant.read_device(device, by_device))
			return "cannot copy the device memory it writes: " + refused->message;
	h->count = static_cast<uint32_t>(ranges.size());
	h->seq = seq;
	std::atomic_ref<uint32_t>(h->valid).store(1, std::memory_order_release);
	return {};
}

std::string UndoLog::save(uint64_t seq, const neuron_cmd &cmd, const gate::Operands &ops, TenantContext &tenant,
			  uint32_t device)
{
	const int written = std::min<int>(kernels::written_operands(cmd.opcode), cmd.num_operands);
	std::vector<Source> ranges;
	for (int w = 0; w < written; ++w) {
		const neuron_tensor_desc &d = cmd.operands[w];
		ranges.push_back({d.mem_space, d.host_buffer, d.addr, ops.bytes[w], ops.where[w].data});
	}
	return write_record(seq, ranges, tenant, device);
}

std::string UndoLog::save_device(uint64_t seq, const std::vector<DeviceRange> &ranges, TenantContext &tenant,
				 uint32_t device)
{
	std::vector<Source> sources;
	for (const DeviceRange &r : ranges)
		sources.push_back({NEURON_MEM_DEVICE, 0, r.addr, r.bytes, r.src});
	return write_record(seq, sources, tenant, device);
}

UndoLog::Restore UndoLog::restore(uint64_t seq, uint32_t device, TenantContext &tenant, std::string *why)
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
		*why = "it writes host memory that neurond cannot save before the command on this backend";
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
	auto *in = static_cast<std::byte *>(map_) + kHeaderBytes;
	TenantMemory &memory = tenant.memory();
	auto lock = memory.lock_exclusive();
	std::vector<TenantContext::DeviceBytes> by_device;
	for (uint32_t i = 0; i < h->count; ++i) {
		const auto &r = h->ranges[i];
		std::byte *dst = nullptr;
		bool found = false;
		if (r.mem_space == NEURON_MEM_DEVICE) {
			uint64_t start = 0;
			if (const DeviceAllocation *a = memory.find_device(device, r.addr, r.bytes, &start)) {
				found = true;
				dst = a->host ? a->host + (r.addr - start) : nullptr;
			}
		} else if (const HostRegion *hr = memory.host(r.host_buffer); hr && r.addr + r.bytes <= hr->size) {
			found = hr->host != nullptr;
			dst = hr->host ? hr->host + r.addr : nullptr;
		}
		if (!found && r.bytes) {
			*why = "operand " + std::to_string(i) + " of command " + std::to_string(seq) +
			       " no longer lies in the tenant's memory";
			return Restore::Failed;
		}
		if (dst && r.bytes)
			std::memcpy(dst, in, r.bytes);
		else if (r.bytes)
			by_device.push_back({r.addr, r.bytes, in});
		in += r.bytes;
	}
	if (!by_device.empty())
		if (auto refused = tenant.write_device(device, by_device)) {
			*why = "cannot put its device memory back: " + refused->message;
			return Restore::Failed;
		}
	return Restore::Restored;
}

} // namespace neuron::backend
