// Futex and clock helpers of the ring protocol (<neuron/ring.hpp>), shared by
// neurond and libneuron; installed with the contracts, not a stable API of its own.
//
// The ring's futex words live in shared memory (a memfd mapped by both processes),
// so these use the shared (non-PRIVATE) futex operations.
#pragma once

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

namespace neuron::detail {

inline std::atomic_ref<uint32_t> atomic_u32(uint32_t &word) { return std::atomic_ref<uint32_t>(word); }
inline std::atomic_ref<uint64_t> atomic_u64(uint64_t &word) { return std::atomic_ref<uint64_t>(word); }

// Sleeps while *word == expected, at most timeout (relative; nullptr = forever).
// Returns 0, or -1 with errno (EAGAIN: value changed, ETIMEDOUT, EINTR).
inline int futex_wait(uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
	return static_cast<int>(syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout, nullptr, 0));
}

inline void futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps until any of `count` words differs from its expected value or is woken.
// Returns the woken index, or -1 with errno. Needs Linux 5.16.
inline int futex_wait_any(struct futex_waitv *waiters, unsigned count, const struct timespec *abs_monotonic)
{
	return static_cast<int>(syscall(SYS_futex_waitv, waiters, count, 0, abs_monotonic, CLOCK_MONOTONIC));
}

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	asm volatile("yield");
#endif
}

// One step of a bounded spin-wait: a few pause instructions, then the CPU goes to
// any other thread runnable on it (sched_yield returns at once when there is none).
// Why the yield: on a host with fewer free CPUs than busy threads, the thread a
// spinner waits for (a tenant waiting for its command, the engine that must run
// it) often sits runnable on the spinner's own CPU; without it, that thread waits
// for the spin to end and then for the spinner's futex sleep, which made most of
// the inference tail beside a trainer (bench-sharing's "CPU wait" rows).
inline void spin_pause()
{
	for (int i = 0; i < 16; ++i)
		cpu_relax();
	sched_yield();
}

inline uint64_t monotonic_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

} // namespace neuron::detail
