/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * neuron_test: raw-ioctl tests of neuron.ko, run inside the QEMU guest.
 * Each test runs in its own process; a failing check prints why and exits.
 */
#ifndef NT_H
#define NT_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <unistd.h>
#include <drm/drm.h>
#include <drm/neuron_accel.h>

#define MIB (1024ull * 1024)
#define NT_UID 1000	/* an unprivileged user */
#define NT_CGROUP "/sys/fs/cgroup"

struct nt_test {
	const char *name;
	void (*fn)(void);
	const char *file;
	int line;
};

#define NT_TEST(n) \
	static void n(void); \
	static const struct nt_test nt_##n \
	__attribute__((used, section("nt_tests"), aligned(8))) = \
		{ #n, n, __FILE__, __LINE__ }; \
	static void n(void)

void nt_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
#define CHECK(c, ...) do { if (!(c)) nt_fail(__FILE__, __LINE__, \
	"check failed: " #c " " __VA_ARGS__); } while (0)
/* An ioctl expected to fail with errno e (0 = succeed). */
#define EXPECT_ERR(e, call) do { int r_ = (call); int e_ = r_ ? errno : 0; \
	if (e_ != (e)) nt_fail(__FILE__, __LINE__, "%s: got %s, want %s", \
		#call, e_ ? strerror(e_) : "success", (e) ? strerror(e) : "success"); \
	} while (0)
#define OK(call) EXPECT_ERR(0, call)

extern int nt_job_timeout_ms;

/* A file of accel<minor> granted every core and DMA queue (by itself). */
int nt_open(int minor);
/* A file as opened: no core, no DMA queue. */
int nt_open_bare(int minor);
/* SET_CORE_MASK from ctl on fd (with DMA mask; tenant if nonzero): -errno. */
int nt_grant(int ctl, int fd, uint64_t cores, uint64_t dmas, uint32_t flags,
	     uint64_t tenant);
uint64_t nt_all_cores(int fd);
uint64_t nt_all_dmas(int fd);
int nt_ioctl(int fd, unsigned long req, void *arg);
uint64_t nt_now_ns(void);
uint64_t nt_deadline_ms(int ms);
uint64_t nt_param(int fd, uint32_t param);

/* BOs */
uint32_t nt_bo(int fd, uint64_t size, uint32_t flags);
void *nt_map(int fd, uint32_t handle, size_t size);
void nt_close_bo(int fd, uint32_t handle);
int nt_bo_wait(int fd, uint32_t handle, int ms);

/* syncobjs */
uint32_t nt_syncobj(int fd);
int nt_syncobj_wait(int fd, uint32_t h, uint64_t point, int ms);
int nt_fence_status(int fd, uint32_t h);	/* 1 ok, 0 busy, <0 error */

/* DMA: one copy, BO list {src READ, dst WRITE}. */
struct nt_sync { uint32_t handle; uint64_t point; };
int nt_dma(int fd, uint32_t q, uint32_t src, uint64_t soff, uint32_t dst,
	   uint64_t doff, uint64_t size, const struct nt_sync *in,
	   const struct nt_sync *out);
/* One DMA job of n copies of size bytes from src to dst (both at offset 0). */
int nt_dma_repeat(int fd, uint32_t src, uint32_t dst, uint32_t n,
		  uint64_t size, const struct nt_sync *out);
/* A compute job: cmd {op, arg}, BO list with bo[0] READ|WRITE. */
int nt_compute(int fd, uint32_t core, uint32_t op, uint32_t arg,
	       uint32_t bo, const struct nt_sync *in, const struct nt_sync *out);

/* Fill a device BO with u32 values i (DMA queue 0), or read it back (1). */
void nt_dev_fill(int fd, uint32_t dev, uint32_t n);
uint32_t *nt_dev_read(int fd, uint32_t dev, uint32_t n);

/*
 * Test engine (child process). Ops: ADD arg to every u32 of bo 0; HANG (never
 * completes); FAIL (-EIO); SLEEP arg ms; PROGRESS: run arg ms reporting
 * progress every 50 ms; SLOW_FILL: sleep arg ms, then fill bo 0 with 0xa5.
 */
enum { NT_OP_ADD = 1, NT_OP_HANG = 2, NT_OP_FAIL = 3, NT_OP_SLEEP = 4,
       NT_OP_PROGRESS = 5, NT_OP_SLOW_FILL = 6 };
pid_t nt_engine_start(int minor);
void nt_engine_stop(pid_t pid);

/* Files */
char *nt_read_file(const char *path);
long long nt_sysfs(int minor, const char *attr);
long long nt_fdinfo(int fd, const char *key);
void nt_drop_privileges(void);

/* cgroup v2 memory groups under NT_CGROUP; max_bytes <= 0: no limit. */
void nt_cgroup_create(const char *name, long long max_bytes);
void nt_cgroup_enter(const char *name);
long long nt_cgroup_value(const char *name, const char *file);
/* Runs fn(arg) in a forked child; returns its wait status. */
int nt_in_child(void (*fn)(void *), void *arg);

#endif
