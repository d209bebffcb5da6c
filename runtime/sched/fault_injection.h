// Fault injection for tests (neurond --enable-fault-injection --inject-fault SPEC):
// make one engine of the simulated chip misbehave on purpose, so that tests and the
// soak benchmark can check that a misbehaving core or DMA engine costs only the
// tenant whose work was on it. Four kinds:
//
//   engine-fault:core=C     the next command started on core C faults (EXEC) instead of running
//   dma-error               the next DMA command of the device fails (EXEC), nothing is copied
//   slow-core:core=C,factor=F  core C runs F times slower (each tile group, then (F-1) times
//                           as long again asleep, holding the core)
//   stuck-core:core=C       the next command started on core C stops making progress; only the
//                           watchdog (--core-watchdog-ms) gets the core back, by resetting it
//
// Each takes device=D (default 0) and after=N (let N commands start on that engine
// first; default 0); the faults also count=N (how many times it fires; default 1,
// 0 = every time), while a slow core stays slow. Every reason a tenant sees, and
// every event, names the spec.
//
// Threads: parsed once at start (control thread); each engine owns a FaultInjector
// with the entries for it and calls it on its own thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron::sched {

struct InjectedFault {
	enum class Kind { EngineFault, DmaError, SlowCore, StuckCore };
	Kind kind = Kind::EngineFault;
	uint32_t device = 0;
	uint32_t core = 0;     // unused for DmaError (the device's DMA engine)
	uint64_t after = 0;    // commands that start on the engine before it fires
	uint64_t count = 1;    // times it fires; 0: every command from `after` on (not SlowCore)
	uint32_t factor = 1;   // SlowCore: how many times slower
	std::string spec;      // the text it was parsed from (kept for reasons and logs)

	bool on_dma_engine() const { return kind == Kind::DmaError; }
};

// Parses one --inject-fault value; returns "" or what is wrong with it.
std::string parse_injected_fault(const std::string &text, InjectedFault *out);
// "engine-fault", "dma-error", "slow-core", "stuck-core".
const char *injected_fault_kind_name(InjectedFault::Kind k);
// The kinds and keys, for --help and errors.
std::string injected_fault_syntax();

// One engine's injected faults: which fires for the command that starts now.
class FaultInjector {
public:
	FaultInjector() = default;
	explicit FaultInjector(std::vector<InjectedFault> faults) : faults_(std::move(faults)), fired_(faults_.size()) {}

	bool empty() const { return faults_.empty(); }
	// A command starts on this engine: the fault that fires for it (the first
	// listed that is due; never a SlowCore), or nullptr. Engine thread only.
	const InjectedFault *next_command();
	// The slow-core entry in force now (its `after` commands have started), or
	// nullptr; *first is set the first time it is returned (to report it once).
	const InjectedFault *slow(bool *first);

private:
	std::vector<InjectedFault> faults_;
	std::vector<uint64_t> fired_;
	uint64_t commands_ = 0;
	bool slow_reported_ = false;
};

} // namespace neuron::sched
