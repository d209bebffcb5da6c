// libFuzzer target: the command gate (runtime/gate/admit.h) and execution. The
// input is a ring slot as a hostile tenant could write it. Whatever passes the gate
// (semantic checks and work limits, then bounds and overlap against the tenant's
// allocations) is executed, so a crash or sanitizer report here means the gate let
// a bad command through.
#include <backend/tenant_memory.h>
#include <chip/device.h>
#include <gate/admit.h>

#include <geometry.h>
#include <kernels.h>

#include <neuron/cmd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <mutex>

using namespace neuron;

namespace {

struct World {
	chip::Device device{0, chip::Profile{"fuzz", 1, 8u << 20, {}}};
	backend::TenantMemory memory;
	uint64_t a = 0, b = 0;
	std::byte host[65536];

	World()
	{
		std::string why;
		a = *device.allocate(1 << 20, 0, &why);
		b = *device.allocate(1 << 20, 0, &why);
		memory.add_device(0, a, backend::DeviceAllocation{1 << 20, device.host_address(a), 0, a});
		memory.add_device(0, b, backend::DeviceAllocation{1 << 20, device.host_address(b), 0, b});
		memory.add_host(1, backend::HostRegion{sizeof(host), host, {}});
	}
};

// Inputs from the fuzzer rarely hit a real allocation by chance: rebase small
// device addresses onto the two allocations so the interesting paths run.
void rebase(neuron_cmd &cmd, const World &w)
{
	for (int k = 0; k < std::min<int>(cmd.num_operands, NEURON_MAX_OPERANDS); ++k)
		if (auto &d = cmd.operands[k]; d.mem_space == NEURON_MEM_DEVICE && d.addr < (4u << 20))
			d.addr = ((d.addr >> 20) & 1 ? w.b : w.a) + (d.addr & 0xfffff);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static World world;
	if (size < 1)
		return 0;
	const bool dma = data[0] & 1;
	neuron_cmd cmd;
	std::memset(&cmd, 0, sizeof(cmd));
	std::memcpy(&cmd, data + 1, std::min(size - 1, sizeof(cmd)));
	rebase(cmd, world);
	static const bool verbose = std::getenv("FUZZ_COMMAND_VERBOSE") != nullptr;
	bool stamped = false;
	uint64_t stamp_addr = 0;
	if (auto f = gate::take_stamp(&cmd, &stamped, &stamp_addr)) {
		if (verbose)
			std::fprintf(stderr, "stamp: %s\n", f->message.c_str());
		return 0;
	}
	if (auto f = gate::check_command(cmd)) {
		if (verbose)
			std::fprintf(stderr, "semantics: %s\n", f->message.c_str());
		return 0;
	}
	std::shared_lock lock(world.memory.mutex);
	gate::Operands ops;
	if (auto f = gate::resolve(cmd, dma, world.memory.space(0), &ops)) {
		if (verbose)
			std::fprintf(stderr, "operands: %s\n", f->message.c_str());
		return 0;
	}
	gate::Placement stamp;
	if (stamped) {
		if (auto f = gate::resolve_stamp(stamp_addr, cmd, ops, world.memory.space(0), &stamp)) {
			if (verbose)
				std::fprintf(stderr, "stamp: %s\n", f->message.c_str());
			return 0;
		}
		const int64_t times[2] = {1, 2}; // what the engine writes there, as it does
		std::memcpy(stamp.data, times, sizeof(times));
	}
	// Validated commands may still be large (up to kMaxCommandWork); run the small
	// ones, where the fuzzer spends its time, and skip the rest to keep it fast.
	if (kernels::command_work(cmd) > (1u << 22))
		return 0;
	if (verbose) // what a crash input runs: opcode, then each operand's shape and strides
		for (int i = 0; i < cmd.num_operands; ++i) {
			const neuron_tensor_desc &t = cmd.operands[i];
			std::fprintf(stderr, "%s operand %d: dtype %d ndim %d sizes/strides", kernels::op_name(cmd.opcode), i,
				     t.dtype, t.ndim);
			for (int d = 0; d < t.ndim && d < NEURON_MAX_DIMS; ++d)
				std::fprintf(stderr, " %lld/%lld", (long long)t.sizes[d], (long long)t.strides[d]);
			std::fprintf(stderr, "\n");
		}
	auto f = kernels::execute(cmd, std::span(ops.views.data(), cmd.num_operands), 1);
	if (verbose)
		std::fprintf(stderr, "executed %s: %s\n", kernels::op_name(cmd.opcode), f ? f->message.c_str() : "ok");
	return 0;
}
