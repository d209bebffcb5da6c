#include "execution.h"

namespace neuron::tile {

Execution::Execution(std::shared_ptr<const TileProgram> program)
	: program_(std::move(program)),
	  mem_(program_->onchip, program_->sbuf_bytes_used, program_->psum_bytes_used)
{
}

bool Execution::step(std::span<std::byte *const> args)
{
	const std::vector<neuron_tile_insn> &insns = program_->insns;
	const Env env{mem_, args, iv_};
	while (pc_ < insns.size()) {
		const neuron_tile_insn &in = insns[pc_];
		if (in.op == NEURON_TILE_OP_LOOP_BEGIN) {
			iv_[depth_++] = 0;
			++pc_;
		} else if (in.op == NEURON_TILE_OP_LOOP_END) {
			const int64_t trip = insns[program_->match[pc_]].i[0];
			if (++iv_[depth_ - 1] < trip) {
				pc_ = program_->match[pc_] + 1;
			} else {
				iv_[--depth_] = 0; // steps of closed loops must see 0 (validate.cpp)
				++pc_;
			}
			++steps_;
			return done();
		} else {
			execute(in, env);
			++pc_;
		}
	}
	++steps_;
	return true;
}

void run(std::shared_ptr<const TileProgram> program, std::span<std::byte *const> args)
{
	Execution e(std::move(program));
	while (!e.step(args)) {
	}
}

} // namespace neuron::tile
