#include "execution.h"

#include <algorithm>
#include <thread>

namespace neuron::tile {

Execution::Execution(std::shared_ptr<const TileProgram> program, int lanes)
	: program_(std::move(program)),
	  mem_(std::make_unique<chip::OnChipMemory>(program_->onchip, program_->sbuf_bytes_used,
						    program_->psum_bytes_used)),
	  max_lanes_(std::max(lanes, 1))
{
}

// Runs from c up to the next loop-iteration boundary (or a parallel loop's
// loop_begin, when forking is allowed). A lane's cursor at the forked loop's
// loop_end claims the loop's next iteration, or ends the lane.
Execution::Stop Execution::advance(Cursor &c, chip::OnChipMemory &mem, std::span<std::byte *const> args, Lane *lane)
{
	const std::vector<neuron_tile_insn> &insns = program_->insns;
	const Env env{mem, args, c.iv};
	while (c.pc < insns.size()) {
		const neuron_tile_insn &in = insns[c.pc];
		if (in.op == NEURON_TILE_OP_LOOP_BEGIN) {
			if (!lane && program_->parallel[c.pc] && may_fork(args))
				return Stop::Fork;
			c.iv[c.depth++] = 0;
			++c.pc;
		} else if (in.op == NEURON_TILE_OP_LOOP_END) {
			const size_t begin = program_->match[c.pc];
			if (lane && c.pc == fork_end_) {
				const int64_t next = next_iteration_.fetch_add(1, std::memory_order_relaxed);
				if (next >= trip_)
					return Stop::End;
				c.iv[c.depth - 1] = next;
				lane->last = next == trip_ - 1;
				c.pc = begin + 1;
			} else if (++c.iv[c.depth - 1] < insns[begin].i[0]) {
				c.pc = begin + 1;
			} else {
				c.iv[--c.depth] = 0; // steps of closed loops must see 0 (validate.cpp)
				++c.pc;
			}
			return Stop::Boundary;
		} else {
			execute(in, env);
			++c.pc;
		}
	}
	return Stop::End;
}

// Lanes need HBM arguments that do not overlap where one is written (a kernel
// called with an output aliasing an input runs in order, as written).
bool Execution::may_fork(std::span<std::byte *const> args)
{
	if (fork_ok_ < 0) {
		fork_ok_ = max_lanes_ > 1;
		const std::vector<uint64_t> &bytes = program_->arg_bytes;
		for (size_t w = 0; w < bytes.size() && fork_ok_; ++w) {
			if (!program_->arg_written[w])
				continue;
			for (size_t a = 0; a < bytes.size(); ++a)
				if (a != w && bytes[a] && bytes[w] && args[a] < args[w] + bytes[w] && args[w] < args[a] + bytes[a])
					fork_ok_ = 0;
		}
	}
	return fork_ok_ == 1;
}

// At a parallel loop's loop_begin: one lane per iteration up to max_lanes_, each
// with the memory as it stands, at the start of its first iteration. False (and
// the loop runs in order) when the host has no memory for the copies.
bool Execution::fork()
{
	const size_t begin = main_.pc;
	const int64_t trip = program_->insns[begin].i[0];
	const int64_t n = std::min<int64_t>(max_lanes_, trip);
	std::vector<Lane> lanes(static_cast<size_t>(n));
	try {
		for (int64_t k = 0; k + 1 < n; ++k)
			lanes[static_cast<size_t>(k)].mem = std::make_unique<chip::OnChipMemory>(*mem_);
	} catch (const std::bad_alloc &) {
		fork_ok_ = 0;
		return false;
	}
	lanes.back().mem = std::move(mem_);
	for (int64_t k = 0; k < n; ++k) {
		Lane &l = lanes[static_cast<size_t>(k)];
		l.at = main_;
		l.at.iv[main_.depth] = k;
		l.at.depth = main_.depth + 1;
		l.at.pc = begin + 1;
		l.last = k == trip - 1;
	}
	trip_ = trip;
	fork_end_ = program_->match[begin];
	lanes_ = std::move(lanes);
	next_iteration_.store(n, std::memory_order_relaxed);
	return true;
}

bool Execution::step(std::span<std::byte *const> args)
{
	const Stop s = advance(main_, *mem_, args, nullptr);
	if (s == Stop::Fork) {
		fork(); // or not: then the next step runs the loop in order
		return false;
	}
	steps_.fetch_add(1, std::memory_order_relaxed);
	return s == Stop::End || done();
}

bool Execution::step_lane(size_t k, std::span<std::byte *const> args)
{
	Lane &l = lanes_[k];
	const Stop s = advance(l.at, *l.mem, args, &l);
	steps_.fetch_add(1, std::memory_order_relaxed); // a loop_end ran, as in order
	l.done = s == Stop::End;
	return l.done;
}

void Execution::join()
{
	for (Lane &l : lanes_)
		if (l.last)
			mem_ = std::move(l.mem);
	main_.pc = fork_end_ + 1;
	main_.iv[main_.depth] = 0;
	lanes_.clear();
}

void run(std::shared_ptr<const TileProgram> program, std::span<std::byte *const> args, int lanes)
{
	Execution e(std::move(program), lanes);
	while (!e.step(args)) {
		if (!e.forked())
			continue;
		std::vector<std::thread> threads;
		for (size_t k = 0; k < e.lanes(); ++k)
			threads.emplace_back([&e, k, args] {
				while (!e.step_lane(k, args)) {
				}
			});
		for (std::thread &t : threads)
			t.join();
		e.join();
		if (e.done())
			return;
	}
}

} // namespace neuron::tile
