// libFuzzer target: tile programs (contracts/include/neuron/tile.h) as a hostile
// tenant could register them. The input is the wire form; whatever parse() and
// validate() accept is executed against HBM arguments of exactly the declared
// sizes, each its own heap block, so an access the validator let through past
// an argument (or past the on-chip memory's backing) is a sanitizer report.
#include <tile/execution.h>
#include <tile/program.h>

#include <chip/profile.h>

#include <memory>
#include <span>
#include <vector>

using namespace neuron;

namespace {

// Executed only below these, so each input stays fast.
constexpr uint64_t kMaxRunWork = 1u << 22;
constexpr uint64_t kMaxArgBytes = 1u << 20;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const chip::OnChip onchip = chip::find_profile("trn2")->onchip;
	std::vector<uint64_t> arg_bytes;
	std::vector<neuron_tile_insn> insns;
	if (!tile::parse(std::as_bytes(std::span(data, size)), &arg_bytes, &insns).empty())
		return 0;
	auto program = std::make_shared<tile::TileProgram>();
	if (!tile::validate(onchip, arg_bytes, insns, program.get()).empty())
		return 0;
	if (program->work > kMaxRunWork)
		return 0;
	std::vector<std::unique_ptr<std::byte[]>> args;
	std::vector<std::byte *> ptrs;
	for (uint64_t n : arg_bytes) {
		if (n > kMaxArgBytes)
			return 0;
		args.push_back(std::make_unique<std::byte[]>(n));
		ptrs.push_back(args.back().get());
	}
	tile::run(program, ptrs);
	return 0;
}
