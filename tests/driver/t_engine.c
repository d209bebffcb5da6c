// SPDX-License-Identifier: GPL-2.0-only
/*
 * Compute jobs through the test engine (nt_engine.c). Also the no-engine
 * error, engine ioctl errors, signals.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "nt.h"

NT_TEST(engine_compute_basic)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	uint32_t dev = nt_bo(fd, 64 * 1024, DRM_NEURON_BO_DEVICE), *p, i;
	struct nt_sync s = { nt_syncobj(fd), 0 };

	CHECK(nt_param(fd, DRM_NEURON_PARAM_ENGINE_ATTACHED) == 1);
	nt_dev_fill(fd, dev, 16384);
	OK(nt_compute(fd, 2, NT_OP_ADD, 1000, dev, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	CHECK(nt_fence_status(fd, s.handle) == 1);
	p = nt_dev_read(fd, dev, 16384);
	for (i = 0; i < 16384; i++)
		CHECK(p[i] == i + 1000, "word %u = %u", i, p[i]);
	/* An error the engine reports reaches the fence. */
	OK(nt_compute(fd, 2, NT_OP_FAIL, 0, dev, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	CHECK(nt_fence_status(fd, s.handle) == -EIO);
	nt_engine_stop(e);
}

/* A timeline across both DMA queues and two cores. */
NT_TEST(engine_syncobj_chain_queues_and_cores)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	uint32_t d1 = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	uint32_t d2 = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	uint32_t src = nt_bo(fd, 4096, 0), dst = nt_bo(fd, 4096, 0);
	uint32_t *ps = nt_map(fd, src, 4096), *pd = nt_map(fd, dst, 4096), i;
	struct nt_sync t[6];

	for (i = 0; i < 6; i++)
		t[i] = (struct nt_sync){ 0, i };
	t[0].handle = nt_syncobj(fd);
	for (i = 1; i < 6; i++)
		t[i].handle = t[0].handle;
	for (i = 0; i < 1024; i++)
		ps[i] = i;
	OK(nt_dma(fd, 0, src, 0, d1, 0, 4096, NULL, &t[1]));
	OK(nt_compute(fd, 1, NT_OP_ADD, 5, d1, &t[1], &t[2]));
	OK(nt_dma(fd, 1, d1, 0, d2, 0, 4096, &t[2], &t[3]));
	OK(nt_compute(fd, 6, NT_OP_ADD, 7, d2, &t[3], &t[4]));
	OK(nt_dma(fd, 0, d2, 0, dst, 0, 4096, &t[4], &t[5]));
	OK(nt_syncobj_wait(fd, t[0].handle, 5, 10000));
	for (i = 0; i < 1024; i++)
		CHECK(pd[i] == i + 12, "word %u = %u", i, pd[i]);
	nt_engine_stop(e);
}

/* Compute jobs of one core finish in order. */
NT_TEST(engine_in_order_per_core)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	uint32_t d = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct nt_sync a = { nt_syncobj(fd), 0 }, b = { nt_syncobj(fd), 0 };

	OK(nt_compute(fd, 4, NT_OP_SLEEP, 150, 0, NULL, &a));
	OK(nt_compute(fd, 4, NT_OP_ADD, 1, d, NULL, &b));
	OK(nt_syncobj_wait(fd, b.handle, 0, 5000));
	CHECK(nt_fence_status(fd, a.handle) == 1);
	nt_engine_stop(e);
}

NT_TEST(no_engine_fails_fast)
{
	int fd = nt_open(0);
	uint32_t d = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct nt_sync s = { nt_syncobj(fd), 0 };
	uint64_t t0 = nt_now_ns();

	CHECK(nt_param(fd, DRM_NEURON_PARAM_ENGINE_ATTACHED) == 0);
	OK(nt_compute(fd, 0, NT_OP_ADD, 1, d, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	/* ENODEV, not ETIMEDOUT: it failed at once, not after the timeout. */
	CHECK(nt_fence_status(fd, s.handle) == -ENODEV);
	printf("# failed after %llu ms\n",
	       (unsigned long long)(nt_now_ns() - t0) / 1000000);
	OK(nt_bo_wait(fd, d, 1000));
}

/* The engine dies holding a job: the job fails with ENODEV. */
NT_TEST(engine_death_fails_its_jobs)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	struct nt_sync s = { nt_syncobj(fd), 0 };

	OK(nt_compute(fd, 5, NT_OP_HANG, 0, 0, NULL, &s));
	usleep(50000);
	nt_engine_stop(e);
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	CHECK(nt_fence_status(fd, s.handle) == -ENODEV);
}

NT_TEST(engine_ioctl_errors)
{
	int fd = nt_open(0), other = nt_open(0);
	struct drm_neuron_engine_attach a = { .flags = 2 };
	struct drm_neuron_engine_fetch f;
	struct drm_neuron_engine_complete c;
	uint32_t buf[4];
	struct drm_neuron_engine_bo bos[1];

#define FETCH(...) (f = (struct drm_neuron_engine_fetch){ \
		.cmd = (uintptr_t)buf, .cmd_size = sizeof(buf), \
		.bos = (uintptr_t)bos, .bo_count = 1, .bo_stride = sizeof(bos[0]), \
		__VA_ARGS__ }, ioctl(fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f))
#define COMPLETE(...) (c = (struct drm_neuron_engine_complete){ __VA_ARGS__ }, \
		ioctl(fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c))
	/* Not attached yet. */
	EXPECT_ERR(EPERM, FETCH());
	EXPECT_ERR(EPERM, COMPLETE(.job_id = 1));
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	a = (struct drm_neuron_engine_attach){ .pad = 1 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	a = (struct drm_neuron_engine_attach){ .flags = DRM_NEURON_ENGINE_DETACH };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	a = (struct drm_neuron_engine_attach){ 0 };
	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	CHECK(a.hbm_size == 256 * MIB && a.hbm_mmap_offset);
	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));	/* again: no-op */
	EXPECT_ERR(EBUSY, ioctl(other, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	/* Only the engine maps HBM. */
	CHECK(mmap(NULL, 4096, PROT_READ, MAP_SHARED, other, a.hbm_mmap_offset) ==
	      MAP_FAILED && errno == EACCES);
	CHECK(mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, a.hbm_mmap_offset) ==
	      MAP_FAILED);
	/* Attached. */
	EXPECT_ERR(ETIME, FETCH());
	EXPECT_ERR(EINVAL, FETCH(.flags = 1));
	EXPECT_ERR(EINVAL, FETCH(.pad = 1));
	EXPECT_ERR(EINVAL, FETCH(.bo_stride = 8));
	EXPECT_ERR(ENOENT, COMPLETE(.job_id = 12345));
	EXPECT_ERR(EINVAL, COMPLETE(.job_id = 1, .status = 1));
	EXPECT_ERR(EINVAL, COMPLETE(.job_id = 1, .status = -5000));
	EXPECT_ERR(EINVAL, COMPLETE(.job_id = 1, .flags = 2));
	EXPECT_ERR(EINVAL, COMPLETE(.job_id = 1, .status = -5,
				    .flags = DRM_NEURON_ENGINE_PROGRESS));
	EXPECT_ERR(ENOENT, COMPLETE(.job_id = 12345,
				    .flags = DRM_NEURON_ENGINE_PROGRESS));
	/* Too small buffers: EOVERFLOW with the sizes, job stays queued. */
	{
		struct nt_sync s = { nt_syncobj(other), 0 };
		uint32_t d = nt_bo(other, 4096, DRM_NEURON_BO_DEVICE);

		OK(nt_compute(other, 0, NT_OP_ADD, 1, d, NULL, &s));
		EXPECT_ERR(EOVERFLOW, FETCH(.cmd_size = 4, .timeout_ns = nt_deadline_ms(2000)));
		CHECK(f.cmd_size == 8 && f.bo_count == 1);
		EXPECT_ERR(EOVERFLOW, FETCH(.bo_count = 0));
		OK(FETCH(.core_mask = 1));
		CHECK(f.core == 0 && buf[0] == NT_OP_ADD && f.job_seq > 0);
		CHECK(bos[0].bo_flags == DRM_NEURON_BO_DEVICE && bos[0].size == 4096);
		OK(COMPLETE(.job_id = f.job_id));
		EXPECT_ERR(ENOENT, COMPLETE(.job_id = f.job_id));
		OK(nt_syncobj_wait(other, s.handle, 0, 2000));
		CHECK(nt_fence_status(other, s.handle) == 1);
	}
	a = (struct drm_neuron_engine_attach){ .flags = DRM_NEURON_ENGINE_DETACH };
	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	EXPECT_ERR(EPERM, FETCH());
#undef FETCH
#undef COMPLETE
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void arm_signal(int restart)
{
	struct sigaction sa = { .sa_handler = on_alarm,
				.sa_flags = restart ? SA_RESTART : 0 };
	struct itimerval it = { .it_value = { 0, 50000 } };

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

NT_TEST(waits_interrupted_by_signals)
{
	pid_t e = nt_engine_start(0);
	int fd = nt_open(0);
	uint32_t d = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct nt_sync s = { nt_syncobj(fd), 0 };
	struct drm_neuron_bo_wait w = { .handle = d };
	uint64_t t0;

	/* BO_WAIT: EINTR without SA_RESTART, then the same call again. */
	OK(nt_compute(fd, 1, NT_OP_SLEEP, 300, d, NULL, &s));
	w.timeout_ns = nt_deadline_ms(5000);
	arm_signal(0);
	t0 = nt_now_ns();
	EXPECT_ERR(EINTR, ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));
	/* A deadline that passes first: ETIME; then the original one. */
	CHECK(nt_bo_wait(fd, d, 20) == -ETIME);
	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));
	CHECK(nt_now_ns() - t0 >= 250000000ull, "job of 300 ms done early");
	/* With SA_RESTART the wait restarts transparently. */
	OK(nt_compute(fd, 1, NT_OP_SLEEP, 200, d, NULL, &s));
	arm_signal(1);
	w.timeout_ns = nt_deadline_ms(5000);
	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));
	CHECK(nt_fence_status(fd, s.handle) == 1);
	/* Syncobj wait on a job in flight. */
	OK(nt_compute(fd, 1, NT_OP_SLEEP, 300, d, NULL, &s));
	arm_signal(0);
	CHECK(nt_syncobj_wait(fd, s.handle, 0, 5000) == -EINTR);
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	nt_engine_stop(e);

	/* ENGINE_FETCH with nothing queued. */
	{
		struct drm_neuron_engine_attach a = { 0 };
		struct drm_neuron_engine_fetch f = { .bo_stride = 24,
			.timeout_ns = nt_deadline_ms(5000) };

		OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
		arm_signal(0);
		EXPECT_ERR(EINTR, ioctl(fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f));
	}
}
