// SPDX-License-Identifier: GPL-2.0-only
/*
 * When a compute job overruns, or the engine goes: only the job that overran
 * on the engine is guilty (its timeout starts at the fetch and progress
 * restarts it), the memory it could still write is not reused until the
 * engine is done with it, and a detached engine's mapping of HBM is revoked.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "nt.h"

NT_TEST(hang_timeout_reset_ban)
{
	pid_t e = nt_engine_start(0);
	int a = nt_open(0), b = nt_open(0);
	uint32_t da = nt_bo(a, 4096, DRM_NEURON_BO_DEVICE);
	uint32_t db = nt_bo(b, 4096, DRM_NEURON_BO_DEVICE), *p;
	struct nt_sync sa = { nt_syncobj(a), 0 }, sb = { nt_syncobj(b), 0 };
	struct drm_neuron_reset_status ra = { 0 }, rb = { 0 };
	uint64_t resets = nt_param(a, DRM_NEURON_PARAM_RESET_COUNT);
	long long core0 = nt_sysfs(0, "core_resets"), total = nt_sysfs(0, "resets");
	uint64_t t0 = nt_now_ns(), dt;

	nt_dev_fill(b, db, 1024);
	OK(nt_compute(a, 0, NT_OP_HANG, 0, da, NULL, &sa));
	OK(nt_compute(b, 0, NT_OP_ADD, 3, db, NULL, &sb));	/* same core */
	OK(nt_syncobj_wait(a, sa.handle, 0, 10 * nt_job_timeout_ms));
	dt = (nt_now_ns() - t0) / 1000000;
	CHECK(dt >= (uint64_t)nt_job_timeout_ms * 8 / 10, "timed out after %llu ms",
	      (unsigned long long)dt);
	CHECK(nt_fence_status(a, sa.handle) == -ETIMEDOUT);
	/* The other file's job on that core ran after the reset. */
	OK(nt_syncobj_wait(b, sb.handle, 0, 5000));
	CHECK(nt_fence_status(b, sb.handle) == 1);
	p = nt_dev_read(b, db, 1024);
	CHECK(p[0] == 3 && p[1023] == 1026);

	OK(ioctl(a, DRM_IOCTL_NEURON_GET_RESET_STATUS, &ra));
	OK(ioctl(b, DRM_IOCTL_NEURON_GET_RESET_STATUS, &rb));
	CHECK(ra.status == DRM_NEURON_CONTEXT_BANNED && ra.guilty_jobs == 1);
	CHECK(rb.status == DRM_NEURON_CONTEXT_OK && rb.guilty_jobs == 0);
	CHECK(ra.device_resets == resets + 1 && rb.device_resets == resets + 1);
	CHECK(nt_sysfs(0, "core_resets") == core0 + 1);
	CHECK(nt_sysfs(0, "resets") == total + 1);
	/* Banned: later submits fail, DMA ones too; b carries on. */
	CHECK(nt_compute(a, 1, NT_OP_ADD, 1, da, NULL, NULL) == -ECANCELED);
	CHECK(nt_dma(a, 0, da, 0, da, 2048, 16, NULL, NULL) == -ECANCELED);
	OK(nt_compute(b, 0, NT_OP_ADD, 1, db, NULL, &sb));
	OK(nt_syncobj_wait(b, sb.handle, 0, 5000));
	CHECK(nt_fence_status(b, sb.handle) == 1);
	nt_engine_stop(e);
}

/* A job waiting for the engine to fetch it is not overrunning anything. */
NT_TEST(engine_waiting_job_not_guilty)
{
	pid_t e = nt_engine_start(0);	/* one job at a time */
	int a = nt_open(0), b = nt_open(0);
	struct nt_sync sa = { nt_syncobj(a), 0 }, sb = { nt_syncobj(b), 0 };
	struct drm_neuron_reset_status ra = { 0 }, rb = { 0 };
	uint64_t resets = nt_param(a, DRM_NEURON_PARAM_RESET_COUNT);
	uint32_t ms = nt_job_timeout_ms * 6 / 10;

	/* b's job waits ms for a's, then runs ms: 1.2 timeouts after submit. */
	OK(nt_compute(a, 0, NT_OP_SLEEP, ms, 0, NULL, &sa));
	OK(nt_compute(b, 4, NT_OP_SLEEP, ms, 0, NULL, &sb));
	OK(nt_syncobj_wait(a, sa.handle, 0, 10000));
	OK(nt_syncobj_wait(b, sb.handle, 0, 10000));
	CHECK(nt_fence_status(a, sa.handle) == 1);
	CHECK(nt_fence_status(b, sb.handle) == 1, "b's job: %d",
	      nt_fence_status(b, sb.handle));
	OK(ioctl(a, DRM_IOCTL_NEURON_GET_RESET_STATUS, &ra));
	OK(ioctl(b, DRM_IOCTL_NEURON_GET_RESET_STATUS, &rb));
	CHECK(ra.status == DRM_NEURON_CONTEXT_OK && rb.status == DRM_NEURON_CONTEXT_OK);
	CHECK(nt_param(a, DRM_NEURON_PARAM_RESET_COUNT) == resets);
	nt_engine_stop(e);
}

/* Progress reports keep a long job alive, up to JOB_MAX_MS after the fetch. */
NT_TEST(engine_progress_restarts_timeout)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	struct nt_sync s = { nt_syncobj(fd), 0 };
	uint64_t max_ms = nt_param(fd, DRM_NEURON_PARAM_JOB_MAX_MS), t0, dt;

	OK(nt_compute(fd, 2, NT_OP_PROGRESS, 3 * nt_job_timeout_ms, 0, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
	CHECK(nt_fence_status(fd, s.handle) == 1, "3 timeouts with progress: %d",
	      nt_fence_status(fd, s.handle));
	/* Past the cap, progress does not help. */
	t0 = nt_now_ns();
	OK(nt_compute(fd, 2, NT_OP_PROGRESS, max_ms + 2 * nt_job_timeout_ms, 0, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 4 * max_ms));
	dt = (nt_now_ns() - t0) / 1000000;
	CHECK(nt_fence_status(fd, s.handle) == -ETIMEDOUT);
	CHECK(dt >= max_ms * 9 / 10, "timed out after %llu ms, cap %llu ms",
	      (unsigned long long)dt, (unsigned long long)max_ms);
	nt_engine_stop(e);
}

/*
 * The engine still writes the BO of a job that overran: the range is not
 * given to anyone else until the engine completes the job (late).
 */
NT_TEST(engine_overrun_memory_quarantined)
{
	pid_t e = nt_engine_start(0);
	int a = nt_open(0), b = nt_open(0);
	uint64_t used0 = nt_param(b, DRM_NEURON_PARAM_HBM_USED), t0;
	uint32_t da = nt_bo(a, MIB, DRM_NEURON_BO_DEVICE), db, *p, i;
	struct nt_sync sa = { nt_syncobj(a), 0 };
	uint32_t late_ms = 3 * nt_job_timeout_ms;

	OK(nt_compute(a, 3, NT_OP_SLOW_FILL, late_ms, da, NULL, &sa));
	t0 = nt_now_ns();
	OK(nt_syncobj_wait(a, sa.handle, 0, 10 * nt_job_timeout_ms));
	CHECK(nt_fence_status(a, sa.handle) == -ETIMEDOUT);
	/* The tenant lets go of everything; the memory stays taken. */
	close(a);
	CHECK(nt_param(b, DRM_NEURON_PARAM_HBM_USED) == used0 + MIB,
	      "HBM of an overrun job freed while the engine may write it");
	db = nt_bo(b, MIB, DRM_NEURON_BO_DEVICE);
	/* The engine writes the old BO, then completes the job, late. */
	while (nt_now_ns() - t0 < (late_ms + 300) * 1000000ull)
		usleep(20000);
	p = nt_dev_read(b, db, MIB / 4);
	for (i = 0; i < MIB / 4; i++)
		CHECK(p[i] == 0, "word %u of another tenant's BO is %#x", i, p[i]);
	/* The late completion released it. */
	t0 = nt_now_ns();
	while (nt_param(b, DRM_NEURON_PARAM_HBM_USED) != used0 + MIB &&
	       nt_now_ns() - t0 < 5000000000ull)
		usleep(20000);
	CHECK(nt_param(b, DRM_NEURON_PARAM_HBM_USED) == used0 + MIB);
	nt_engine_stop(e);
}

/* An engine of our own, mapped; returns the mapping and its size. */
static uint8_t *attach_and_map(int fd, uint64_t *size)
{
	struct drm_neuron_engine_attach a = { 0 };
	uint8_t *hbm;

	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	hbm = mmap(NULL, a.hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   a.hbm_mmap_offset);
	CHECK(hbm != MAP_FAILED, "mmap: %s", strerror(errno));
	*size = a.hbm_size;
	return hbm;
}

/* A device BO filled with u32 i; returns its HBM address. */
static uint64_t filled_bo(int fd)
{
	uint32_t d = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct drm_neuron_bo_info info = { .handle = d };

	nt_dev_fill(fd, d, 1024);
	OK(nt_bo_wait(fd, d, 5000));
	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &info));
	return info.device_addr;
}

static void detach_child(void *arg)
{
	int eng = nt_open_bare(0), t = nt_open(0);
	struct drm_neuron_engine_attach a = { .flags = DRM_NEURON_ENGINE_DETACH };
	uint64_t size, addr = filled_bo(t);
	volatile uint32_t *w;
	uint8_t *hbm = attach_and_map(eng, &size);

	w = (volatile uint32_t *)(hbm + addr);
	CHECK(w[5] == 5, "the engine reads the BO");
	OK(ioctl(eng, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	w[5] = 77;	/* must raise SIGBUS: the mapping is revoked */
	printf("# wrote through a revoked mapping\n");
}

static void close_child(void *arg)
{
	int eng = nt_open_bare(0), t = nt_open(0), eng2 = nt_open_bare(0);
	struct drm_neuron_engine_attach a = { 0 };
	uint64_t size, addr = filled_bo(t);
	volatile uint32_t *w;
	uint8_t *hbm = attach_and_map(eng, &size);

	w = (volatile uint32_t *)(hbm + addr);
	CHECK(w[7] == 7);
	/* Closing the descriptor detaches, although the mapping pins the file. */
	close(eng);
	CHECK(nt_param(t, DRM_NEURON_PARAM_ENGINE_ATTACHED) == 0,
	      "closed engine still attached");
	OK(ioctl(eng2, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	(void)w[7];	/* SIGBUS */
	printf("# read through a revoked mapping\n");
}

static void unbacked_child(void *arg)
{
	int eng = nt_open_bare(0);
	uint64_t size;
	volatile uint8_t *hbm = attach_and_map(eng, &size);

	(void)hbm[size - 4096];	/* no BO there: SIGBUS */
	printf("# read a page no BO backs\n");
}

/* The engine's mapping shows backed pages of BOs, to the attached engine. */
NT_TEST(engine_mapping_revoked)
{
	int st;

	st = nt_in_child(detach_child, NULL);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "after DETACH: status %#x", st);
	st = nt_in_child(close_child, NULL);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "after close: status %#x", st);
	st = nt_in_child(unbacked_child, NULL);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "unbacked page: status %#x", st);
}
