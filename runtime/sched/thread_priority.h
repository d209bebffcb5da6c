// The OS priority of an engine thread, by the class of the work it runs.
//
// The simulated chip runs tiles on host threads that share the host's CPUs with
// the tenants and the daemon's other engines. A training tile that holds a CPU
// delays the wake-up of an inference engine (or of the inference tenant waiting
// for its result) by up to the kernel's wake-up granularity, milliseconds on a
// 2-CPU host, which is the inference tail bench-sharing measures. At a higher nice
// value the training tile is preempted at once by a waking normal-priority thread,
// and with nothing else to run it keeps the whole CPU (nice only weighs shares).
#pragma once

namespace neuron::sched {

// True if this process may lower a thread's nice value again after raising it
// (CAP_SYS_NICE, or RLIMIT_NICE down to 0). Without that an engine niced for a
// training tile could not run the next inference tile at normal priority, so
// callers keep every engine at normal priority.
bool can_restore_priority();

// Sets the calling thread's nice value to n; false (and errno) if refused. The
// value is remembered per thread, so only a change costs a syscall (one at a
// switch between classes, none per tile). Engine threads call it per tile group,
// and so do the emu runner's OpenMP tile threads (RunContext::nice).
bool set_thread_nice(int n);

} // namespace neuron::sched
