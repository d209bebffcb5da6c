#include "admit.h"

#include <backend/queue.h>

#include <geometry.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>

namespace neuron::gate {

using kernels::Fault;

namespace {

Fault fault(uint32_t code, std::string message) { return Fault{code, std::move(message)}; }

// The command's wait on another queue of its tenant: nullopt when it may start.
std::optional<Admission::Kind> check_wait(const backend::Queue &q, const neuron_cmd &cmd, uint64_t seq, Fault *out)
{
	if (cmd.wait.queue_id == 0)
		return std::nullopt;
	std::shared_ptr<backend::Queue> other = q.peers().find(cmd.wait.queue_id);
	if (!other || (other.get() == &q && cmd.wait.value >= seq)) {
		*out = fault(NEURON_FAULT_BAD_WAIT, "command waits on queue " + std::to_string(cmd.wait.queue_id) +
							    (other ? " for a value it can never reach"
								   : ", which this tenant does not own"));
		return Admission::Fault;
	}
	if (other->completed() >= cmd.wait.value)
		return std::nullopt;
	if (other->faulted() || other->retired()) {
		*out = fault(NEURON_FAULT_BAD_WAIT, "command waits on queue " + std::to_string(cmd.wait.queue_id) +
							    ", which faulted or was destroyed before reaching " +
							    std::to_string(cmd.wait.value));
		return Admission::Fault;
	}
	return Admission::Blocked;
}

// The rest of an EXEC_PROGRAM slot (a's command is in *cmd): its fields, and
// its bindings from its own slot and the slots after it, all of which the
// tenant must have published with it.
void admit_program(const backend::Queue &q, uint64_t tail, const neuron_cmd &cmd, program::Exec *exec,
		   Admission *a)
{
	a->kind = Admission::Fault;
	const uint64_t count = static_cast<uint64_t>(cmd.iscalars[1]);
	if (!exec) {
		a->fault = fault(NEURON_FAULT_BAD_OPCODE, "EXEC_PROGRAM runs on core queues only");
		return;
	}
	if (cmd.num_operands != 0 || cmd.reserved0 != 0 || (cmd.flags & ~NEURON_EXEC_RNG) != 0 ||
	    cmd.fscalars.bits[0] | cmd.fscalars.bits[1] | cmd.fscalars.bits[2] | cmd.fscalars.bits[3]) {
		a->fault = fault(NEURON_FAULT_BAD_OPERAND, "EXEC_PROGRAM: num_operands, reserved0 and f[] must be zero and "
							   "flags NEURON_EXEC_RNG or 0");
		return;
	}
	if (count > NEURON_PROGRAM_MAX_ARGS) {
		a->fault = fault(NEURON_FAULT_BAD_OPERAND, "EXEC_PROGRAM binds " + std::to_string(count) +
								   " arguments; a program has at most " +
								   std::to_string(NEURON_PROGRAM_MAX_ARGS));
		return;
	}
	const uint32_t slots = neuron_exec_slots(count);
	if (slots > q.slot_count() || tail - a->seq + 1 < slots) {
		a->fault = fault(NEURON_FAULT_RING, "EXEC_PROGRAM at " + std::to_string(a->seq) + " binds " +
							    std::to_string(count) + " arguments in " + std::to_string(slots) +
							    " slots, but the tenant published " +
							    std::to_string(tail - a->seq + 1) +
							    ": a command's slots must be published at once, within the ring");
		return;
	}
	exec->flags = cmd.flags;
	exec->rng_seed = static_cast<uint64_t>(cmd.iscalars[2]);
	exec->rng_offset = static_cast<uint64_t>(cmd.iscalars[3]);
	exec->bindings.resize(count);
	const size_t first = std::min<uint64_t>(count, NEURON_EXEC_INLINE_BINDINGS);
	q.ring().read_bytes(a->seq, offsetof(neuron_exec_slot, bindings), exec->bindings.data(), first * 8);
	for (size_t done = first, s = 1; done < count; ++s) {
		const size_t n = std::min<size_t>(count - done, NEURON_EXEC_SLOT_BINDINGS);
		q.ring().read_bytes(a->seq + s, 0, exec->bindings.data() + done, n * 8);
		done += n;
	}
	a->slots = slots;
	a->kind = Admission::Ready;
}

} // namespace

std::string hex(uint64_t v)
{
	char buf[32];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

std::string operand_name(const neuron_cmd &cmd, int k)
{
	return "operand " + std::to_string(k) + (k < kernels::written_operands(cmd) ? " (output)" : " (input)");
}

std::optional<Fault> take_stamp(neuron_cmd *cmd, bool *stamped, uint64_t *stamp_addr)
{
	*stamped = false;
	if (!(cmd->flags & NEURON_CMD_F_STAMP))
		return std::nullopt;
	if (cmd->num_operands == 0 || cmd->num_operands > NEURON_MAX_OPERANDS)
		return fault(NEURON_FAULT_BAD_OPERAND, "flags has NEURON_CMD_F_STAMP but num_operands=" +
							       std::to_string(cmd->num_operands) +
							       ": the stamp is the last operand, after the op's own");
	const int k = cmd->num_operands - 1;
	const neuron_tensor_desc &d = cmd->operands[k];
	bool rest_zero = d.reserved == 0;
	for (int i = 1; i < NEURON_MAX_DIMS; ++i)
		rest_zero = rest_zero && d.sizes[i] == 0 && d.strides[i] == 0;
	if (d.mem_space != NEURON_MEM_DEVICE || d.host_buffer != 0 || d.dtype != NEURON_DTYPE_I64 || d.ndim != 1 ||
	    d.sizes[0] != 2 || d.strides[0] != 1 || !rest_zero)
		return fault(NEURON_FAULT_BAD_OPERAND,
			     "operand " + std::to_string(k) +
				     " (the stamp, flags NEURON_CMD_F_STAMP) must be 2 contiguous i64 in device memory "
				     "(mem_space 0, dtype 5, ndim 1, size 2, stride 1, the rest zero)");
	*stamped = true;
	*stamp_addr = d.addr;
	cmd->operands[k] = neuron_tensor_desc{};
	--cmd->num_operands;
	cmd->flags &= ~NEURON_CMD_F_STAMP;
	return std::nullopt;
}

std::optional<Fault> check_command(const neuron_cmd &cmd)
{
	if (auto f = kernels::check_semantics(cmd))
		return f;
	for (int k = 0; k < cmd.num_operands; ++k)
		if (kernels::numel(cmd.operands[k]) > kernels::kMaxElementsPerOperand)
			return fault(NEURON_FAULT_BAD_OPERAND,
				     "operand " + std::to_string(k) + " has more than 2^32 elements; split the work");
	if (kernels::command_work(cmd) > kernels::kMaxCommandWork)
		return fault(NEURON_FAULT_BAD_OPERAND,
			     "command needs more than 2^37 element operations; split it (e.g. a matmul into blocks)");
	return std::nullopt;
}

Admission admit_next(const backend::Queue &q, neuron_cmd *cmd, program::Exec *exec)
{
	Admission a;
	a.seq = q.next_seq();
	const uint64_t tail = q.ring().tail();
	if (tail < a.seq)
		return a; // Empty
	if (q.ring().overrun(tail, a.seq - 1)) {
		// The tenant published more commands than the ring holds: a broken or
		// hostile client. Its queue faults; nothing else is affected.
		a.kind = Admission::Fault;
		a.fault = fault(NEURON_FAULT_RING, "ring protocol violated: tail " + std::to_string(tail) +
							   " is more than " + std::to_string(q.slot_count()) +
							   " slots ahead of completed " + std::to_string(a.seq - 1));
		return a;
	}
	// Private copy first: the tenant can still write the shared slot.
	q.ring().read(a.seq, cmd);
	a.user_tag = cmd->user_tag;
	if (auto k = check_wait(q, *cmd, a.seq, &a.fault)) {
		a.kind = *k;
		return a;
	}
	if (cmd->opcode == NEURON_OP_EXEC_PROGRAM) {
		admit_program(q, tail, *cmd, q.kind() == backend::QueueKind::Core ? exec : nullptr, &a);
		return a;
	}
	if (cmd->opcode == NEURON_OP_TILE_KERNEL) {
		a.kind = Admission::Fault;
		a.fault = fault(NEURON_FAULT_BAD_OPCODE, "tile_kernel runs only as a node of a program (register the "
							 "kernel's tile program with one, then EXEC_PROGRAM it)");
		return a;
	}
	if (auto f = take_stamp(cmd, &a.stamped, &a.stamp_addr)) {
		a.kind = Admission::Fault;
		a.fault = std::move(*f);
		return a;
	}
	if (auto f = check_command(*cmd)) {
		a.kind = Admission::Fault;
		a.fault = std::move(*f);
		return a;
	}
	a.kind = Admission::Ready;
	return a;
}

std::optional<Fault> resolve(const neuron_cmd &cmd, bool dma, const MemorySpace &memory, Operands *out)
{
	const int n = cmd.num_operands;
	if (dma && cmd.opcode != NEURON_OP_COPY && cmd.opcode != NEURON_OP_NOP)
		return fault(NEURON_FAULT_BAD_OPCODE, "opcode " + std::to_string(cmd.opcode) +
							      " is not a DMA operation: DMA queues run COPY and NOP only");
	std::array<kernels::ByteRange, NEURON_MAX_OPERANDS> ranges{};
	const int written = kernels::written_operands(cmd);
	for (int k = 0; k < n; ++k) {
		const neuron_tensor_desc &d = cmd.operands[k];
		// Named only for a fault: building the name costs a heap allocation, and
		// this runs for every operand of every tile.
		auto who = [&] { return operand_name(cmd, k); };
		const auto extent = kernels::byte_extent(d);
		if (!extent)
			return fault(NEURON_FAULT_OUT_OF_BOUNDS, who() + ": sizes and strides reach past 2^62 bytes");
		Placement &p = out->where[k];
		p = Placement{};
		std::string why;
		if (d.mem_space == NEURON_MEM_DEVICE) {
			if (d.host_buffer != 0)
				return fault(NEURON_FAULT_BAD_OPERAND, who() + ": host_buffer must be 0 for device memory");
			if (*extent > 0 && !memory.place_device(d.addr, *extent, k < written, &p, &why))
				return fault(NEURON_FAULT_OUT_OF_BOUNDS, who() + ": " + why);
		} else if (d.mem_space == NEURON_MEM_HOST) {
			if (!dma)
				return fault(NEURON_FAULT_BAD_OPERAND, who() + ": host memory can only be named on a DMA queue");
			if (!memory.place_host(d.host_buffer, d.addr, *extent, k < written, &p, &why))
				return fault(NEURON_FAULT_OUT_OF_BOUNDS, who() + ": " + why);
		} else {
			return fault(NEURON_FAULT_BAD_OPERAND,
				     who() + ": mem_space " + std::to_string(d.mem_space) + " is unknown");
		}
		kernels::View &v = out->views[k];
		v.data = *extent > 0 ? p.data : nullptr;
		v.dtype = static_cast<neuron_dtype>(d.dtype);
		v.ndim = d.ndim;
		std::copy(std::begin(d.sizes), std::end(d.sizes), v.sizes);
		std::copy(std::begin(d.strides), std::end(d.strides), v.strides);
		ranges[k] = {p.key, *extent};
		out->bytes[k] = *extent;
	}
	return kernels::check_output_overlap(cmd, std::span(ranges.data(), size_t(n)));
}

std::optional<Fault> resolve_stamp(uint64_t address, const neuron_cmd &cmd, const Operands &ops,
				   const MemorySpace &memory, Placement *out)
{
	std::string why;
	if (!memory.place_device(address, kStampBytes, true, out, &why))
		return fault(NEURON_FAULT_OUT_OF_BOUNDS, "the stamp (flags NEURON_CMD_F_STAMP): " + why);
	for (int k = 0; k < cmd.num_operands; ++k)
		if (ops.bytes[k] > 0 && out->key < ops.where[k].key + ops.bytes[k] && ops.where[k].key < out->key + kStampBytes)
			return fault(NEURON_FAULT_OVERLAP, "the stamp (flags NEURON_CMD_F_STAMP) overlaps " +
								   operand_name(cmd, k) + ": give it bytes of its own");
	return std::nullopt;
}

} // namespace neuron::gate

namespace neuron::gate {

std::optional<Fault> bind_program(const program::Program &p, const program::Exec &exec, const MemorySpace &memory)
{
	const size_t n = p.arg_bytes.size();
	if (exec.bindings.size() != n)
		return fault(NEURON_FAULT_BAD_OPERAND, "program " + std::to_string(p.id) + " takes " + std::to_string(n) +
							       " arguments; EXEC_PROGRAM binds " +
							       std::to_string(exec.bindings.size()));
	struct Bound {
		uint64_t key, end;
		uint32_t arg;
	};
	std::vector<Bound> bound;
	bound.reserve(n);
	for (uint32_t k = 0; k < n; ++k) {
		Placement place;
		std::string why;
		if (!memory.place_device(exec.bindings[k], p.arg_bytes[k], p.arg_written[k] != 0, &place, &why))
			return fault(NEURON_FAULT_OUT_OF_BOUNDS, "program " + std::to_string(p.id) + " argument " +
									 std::to_string(k) + " (" + std::to_string(p.arg_bytes[k]) +
									 " bytes): " + why);
		bound.push_back({place.key, place.key + p.arg_bytes[k], k});
	}
	std::sort(bound.begin(), bound.end(), [](const Bound &a, const Bound &b) { return a.key < b.key; });
	// Sorted by start: an argument overlaps those after it that start before it ends.
	for (size_t i = 0; i < bound.size(); ++i)
		for (size_t j = i + 1; j < bound.size() && bound[j].key < bound[i].end; ++j) {
			const uint32_t a = bound[i].arg, b = bound[j].arg;
			if (!p.arg_written[a] && !p.arg_written[b])
				continue;
			const uint32_t w = p.arg_written[a] ? a : b;
			return fault(NEURON_FAULT_OVERLAP, "program " + std::to_string(p.id) + " arguments " +
								   std::to_string(std::min(a, b)) + " and " +
								   std::to_string(std::max(a, b)) +
								   " overlap, and the program writes argument " + std::to_string(w) +
								   ": bind it to memory no other argument touches");
		}
	return std::nullopt;
}

} // namespace neuron::gate
