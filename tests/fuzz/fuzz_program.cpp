// libFuzzer target: RegisterProgram (<neuron/program.h>). The input is the
// Program message a tenant sends (contracts/neuron.proto), decoded as neurond
// decodes it (daemon/program_decode.cpp) and validated (runtime/program/
// validate.cpp). A program the validator accepts is then replayed as the engine
// replays one: its arguments and buffers allocated for their declared sizes, the
// replay's bindings checked (gate::bind_program), each node materialised and its
// operands resolved against the tenant's memory (which must succeed: the
// validator vouched for every operand; a refusal aborts), and run (a kernel's
// fault, e.g. an index out of range, is a normal replay fault). A crash, an
// abort, a sanitizer report or a hang here means the validator let a bad program
// through, or choked on one.
//
// Seeds: real programs that torch.compile registered (tests/fuzz/program_seeds/,
// written by tests/fuzz/capture-program-seeds.sh).
#include "program_decode.h"

#include <backend/tenant_memory.h>
#include <chip/device.h>
#include <gate/admit.h>
#include <program/program.h>
#include <program/validate.h>

#include <geometry.h>
#include <kernels.h>

#include <neuron/program.h>

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

using namespace neuron;

namespace {

// What a replay may take here: programs whose arguments and buffers need more
// are validated but not run.
constexpr uint64_t kMaxPlacedBytes = 8u << 20;
constexpr uint64_t kMaxRunWork = 1u << 22;

struct World {
	chip::Device device{0, chip::Profile{"fuzz", 1, 32u << 20}};
	backend::TenantMemory memory;
};

bool verbose() { return std::getenv("FUZZ_PROGRAM_VERBOSE") != nullptr; }

// Allocates every argument and buffer; false (nothing left allocated) if they do not fit.
bool place(World &w, program::Program &p, program::Exec &exec, std::vector<uint64_t> &held)
{
	uint64_t total = 0;
	for (uint64_t b : p.arg_bytes)
		total += b;
	for (uint64_t b : p.buffer_bytes)
		total += b;
	if (total > kMaxPlacedBytes)
		return false;
	auto lock = w.memory.lock_exclusive();
	auto one = [&](uint64_t bytes, std::vector<uint64_t> &into) {
		std::string why;
		auto a = w.device.allocate(bytes, 0, &why);
		if (!a)
			return false;
		w.memory.add_device(0, *a, backend::DeviceAllocation{bytes, w.device.host_address(*a), 0, *a});
		held.push_back(*a);
		into.push_back(*a);
		return true;
	};
	for (uint64_t b : p.arg_bytes)
		if (!one(b, exec.bindings))
			return false;
	for (uint64_t b : p.buffer_bytes)
		if (!one(b, p.buffer_address))
			return false;
	return true;
}

void release(World &w, const std::vector<uint64_t> &held)
{
	auto lock = w.memory.lock_exclusive();
	for (uint64_t a : held) {
		w.memory.remove_device(0, a);
		w.device.release(a);
	}
}

[[noreturn]] void validator_bug(const std::string &where, const std::string &why)
{
	std::fprintf(stderr, "fuzz-program: validate() accepted a program the replay refuses: %s: %s\n", where.c_str(),
		     why.c_str());
	std::abort();
}

// Node after node, as sched/engine.cpp and the emu runner run a replay.
void replay(World &w, const program::Program &p, const program::Exec &exec)
{
	std::shared_lock lock(w.memory.mutex);
	// Every argument has an allocation of its own, of its declared size: the
	// bindings are valid, and so is every operand of every node (validate()
	// checked them against those sizes). A refusal here is a validator bug.
	if (auto f = gate::bind_program(p, exec, w.memory.space(0)))
		validator_bug("bindings", f->message);
	for (size_t k = 0; k < p.nodes.size(); ++k) {
		neuron_cmd cmd;
		program::materialise(p, k, exec, &cmd);
		gate::Operands ops;
		if (auto f = gate::resolve(cmd, false, w.memory.space(0), &ops))
			validator_bug(program::node_name(p, k), f->message);
		if (kernels::command_work(cmd) > kMaxRunWork)
			continue; // valid but slow: the fuzzer's time goes to the small ones
		auto f = kernels::execute(cmd, std::span(ops.views.data(), cmd.num_operands), 1);
		if (verbose())
			std::fprintf(stderr, "%s: %s\n", program::node_name(p, k).c_str(), f ? f->message.c_str() : "ok");
		if (f)
			return;
	}
}

} // namespace

// protobuf logs every string field with bad UTF-8 it parses: thousands of lines a run.
extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	google::protobuf::SetLogHandler(nullptr);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static World world;
	api::Program message;
	if (!message.ParseFromArray(data, static_cast<int>(size)))
		return 0;
	program::Description desc;
	if (auto why = daemon::decode_program(message, &desc); !why.empty()) {
		if (verbose())
			std::fprintf(stderr, "decode: %s\n", why.c_str());
		return 0;
	}
	if (desc.device != 0)
		return 0; // neurond refuses devices it does not have before validating
	program::Program prog;
	if (auto why = program::validate(desc, &prog); !why.empty()) {
		if (verbose())
			std::fprintf(stderr, "refused: %s\n", why.c_str());
		return 0;
	}
	program::Exec exec;
	exec.flags = NEURON_EXEC_RNG;
	exec.rng_seed = 1;
	std::vector<uint64_t> held;
	if (place(world, prog, exec, held))
		replay(world, prog, exec);
	release(world, held);
	return 0;
}
