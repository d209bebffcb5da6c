#include "kernel_job.h"

#include <tile/execution.h>

#include <cstring>
#include <string>
#include <string_view>

namespace neuron::kmd {

namespace {

constexpr size_t kCachedPrograms = 32;
// The largest wire form: header, arguments, instructions.
constexpr uint64_t kMaxProgramBytes = sizeof(neuron_tile_program_header) + NEURON_TILE_MAX_ARGS * sizeof(uint64_t) +
				      uint64_t(NEURON_TILE_MAX_INSNS) * sizeof(neuron_tile_insn);

kernels::Fault bad(std::string why) { return kernels::Fault{NEURON_FAULT_BAD_OPERAND, "tile kernel: " + why}; }

} // namespace

std::shared_ptr<const tile::TileProgram> TileProgramCache::get(std::span<const std::byte> wire,
							       const chip::OnChip &onchip, std::string *why)
{
	const size_t h = std::hash<std::string_view>{}(
		std::string_view(reinterpret_cast<const char *>(wire.data()), wire.size()));
	{
		std::lock_guard lock(mutex_);
		for (const Entry &e : entries_)
			if (e.hash == h && e.wire.size() == wire.size() &&
			    std::memcmp(e.wire.data(), wire.data(), wire.size()) == 0)
				return e.program;
	}
	// Validated outside the lock (a large program takes a while); from a private
	// copy, which is also what the cache compares against later.
	std::vector<std::byte> copy(wire.begin(), wire.end());
	std::vector<uint64_t> arg_bytes;
	std::vector<neuron_tile_insn> insns;
	*why = tile::parse(copy, &arg_bytes, &insns);
	if (!why->empty())
		return nullptr;
	auto p = std::make_shared<tile::TileProgram>();
	*why = tile::validate(onchip, arg_bytes, insns, p.get());
	if (!why->empty())
		return nullptr;
	std::lock_guard lock(mutex_);
	entries_.push_back({h, std::move(copy), p});
	while (entries_.size() > kCachedPrograms)
		entries_.pop_front();
	return p;
}

std::optional<kernels::Fault> check_kernel(const TileJobEntry &e, const gate::MemorySpace &space,
					   const chip::OnChip *onchip, TileProgramCache &cache, CheckedKernel *out)
{
	if (!(e.flags & kTileKernel) || e.cmd.opcode != NEURON_OP_TILE_KERNEL)
		return bad("a TILE_KERNEL command and the kTileKernel flag go together");
	if (!onchip)
		return kernels::Fault{NEURON_FAULT_BAD_OPCODE,
				      "tile kernel: the engine does not know the device's chip profile"};
	if (e.program_bytes == 0 || e.program_bytes > kMaxProgramBytes)
		return bad("program of " + std::to_string(e.program_bytes) + " bytes");
	gate::Placement at;
	std::string why;
	if (!space.place_device(e.program_address, e.program_bytes, false, &at, &why))
		return kernels::Fault{NEURON_FAULT_OUT_OF_BOUNDS, "tile kernel program: " + why};
	out->program = cache.get(std::span<const std::byte>(at.data, e.program_bytes), *onchip, &why);
	if (!out->program)
		return bad("its program is refused: " + why);
	const tile::TileProgram &p = *out->program;
	// The node against its program, as the daemon checked it at registration.
	if (size_t(e.cmd.num_operands) != p.arg_bytes.size())
		return bad(std::to_string(e.cmd.num_operands) + " operands for a program of " +
			   std::to_string(p.arg_bytes.size()) + " arguments");
	for (int k = 0; k < e.cmd.num_operands; ++k) {
		if (uint64_t(e.cmd.operands[k].sizes[0]) != p.arg_bytes[k])
			return bad("operand " + std::to_string(k) + " has " + std::to_string(e.cmd.operands[k].sizes[0]) +
				   " bytes, its argument " + std::to_string(p.arg_bytes[k]));
		if (p.arg_written[k] && k >= e.cmd.iscalars[1])
			return bad("the program writes argument " + std::to_string(k) + ", an input of the command");
	}
	if (uint64_t(e.cmd.iscalars[2]) != p.steps)
		return bad("the command says " + std::to_string(e.cmd.iscalars[2]) + " steps, the program has " +
			   std::to_string(p.steps));
	if (e.tile == kWholeCommand) {
		// Only a kernel of one step runs whole: a longer one would hold the core
		// for all its steps, where the scheduler may switch between any two.
		if (p.steps != 1)
			return bad("a kernel of " + std::to_string(p.steps) + " steps runs one step per job");
		return std::nullopt;
	}
	if (e.tile >= p.steps)
		return bad("step " + std::to_string(e.tile) + " of a kernel of " + std::to_string(p.steps));
	out->state_bytes = tile::Execution::state_bytes(p);
	if (e.state_slot_bytes != out->state_bytes || e.state_chains != 1)
		return bad("state of " + std::to_string(e.state_chains) + " x " + std::to_string(e.state_slot_bytes) +
			   " bytes, the program's is 1 x " + std::to_string(out->state_bytes));
	if (!space.place_device(e.state_address, out->state_bytes, true, &at, &why))
		return kernels::Fault{NEURON_FAULT_OUT_OF_BOUNDS, "tile kernel state: " + why};
	out->state = at.data;
	return std::nullopt;
}

std::optional<kernels::Fault> run_kernel(const TileJobEntry &e, const CheckedKernel &k, const gate::Operands &ops)
{
	std::byte *args[NEURON_MAX_OPERANDS];
	for (int a = 0; a < NEURON_MAX_OPERANDS; ++a)
		args[a] = ops.views[a].data;
	const std::span<std::byte *const> a(args, k.program->arg_bytes.size());
	if (!k.state) {
		tile::run(k.program, a, 1);
		return std::nullopt;
	}
	tile::Execution x(k.program, 1);
	const std::span<std::byte> state(k.state, k.state_bytes);
	if (e.tile > 0)
		if (auto why = x.load(state); !why.empty())
			return kernels::Fault{NEURON_FAULT_EXEC, "tile kernel step " + std::to_string(e.tile) + ": " + why};
	if (x.steps_run() != e.tile)
		return kernels::Fault{NEURON_FAULT_EXEC, "tile kernel step " + std::to_string(e.tile) +
								 " asked, its saved state is at step " +
								 std::to_string(x.steps_run())};
	if (!x.step(a))
		x.save(state);
	return std::nullopt;
}

} // namespace neuron::kmd
