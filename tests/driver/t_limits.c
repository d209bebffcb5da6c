// SPDX-License-Identifier: GPL-2.0-only
/*
 * Bounds on what one file may ask of the device: unfinished jobs per file
 * (their memory charged to the opener), bytes per DMA job, QUERY sizes; and
 * how they are announced (GET_PARAM).
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include "nt.h"

#define COPY (8 * MIB)

NT_TEST(limits_announced)
{
	int fd = nt_open(0);
	uint64_t caps = nt_param(fd, DRM_NEURON_PARAM_CAPABILITIES);

	CHECK(nt_param(fd, DRM_NEURON_PARAM_API_VERSION) == (1ull << 32 | 1));
	CHECK(caps & DRM_NEURON_CAP_ACCESS_CONTROL);
	CHECK(caps & DRM_NEURON_CAP_ENGINE_PROGRESS);
	CHECK(caps & DRM_NEURON_CAP_JOB_LIMITS);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_MAX_DMA_BYTES) == 1024 * MIB);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_MAX_JOBS) == 256);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_JOB_MAX_MS) ==
	      10ull * nt_job_timeout_ms);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_DMA_MASK) == 3);
}

/* A DMA job copies at most MAX_DMA_BYTES in all (it used to be 256 BOs). */
NT_TEST(limits_dma_job_bytes)
{
	int fd = nt_open(0);
	uint32_t src = nt_bo(fd, COPY, 0), dst = nt_bo(fd, COPY, 0);
	struct nt_sync s = { nt_syncobj(fd), 0 };
	int st;

	CHECK(nt_dma_repeat(fd, src, dst, 129, COPY, NULL) == -EINVAL, "1032 MiB accepted");
	CHECK(nt_dma_repeat(fd, src, dst, 256, COPY, NULL) == -EINVAL);
	/* Exactly the budget is accepted (and may overrun the timeout here). */
	OK(nt_dma_repeat(fd, src, dst, 128, COPY, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
	st = nt_fence_status(fd, s.handle);
	CHECK(st == 1 || st == -ETIMEDOUT, "status %d", st);
	printf("# 1 GiB DMA job: %s\n", st == 1 ? "done" : "timed out");
}

/*
 * Unfinished jobs per file are capped: an engine that fetches nothing keeps
 * every compute job unfinished (none is guilty of waiting).
 */
NT_TEST(limits_jobs_per_file)
{
	int eng = nt_open_bare(0), fd = nt_open(0), other = nt_open(0), i, r;
	struct drm_neuron_engine_attach a = { 0 };
	uint32_t d = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	uint32_t h = nt_bo(fd, 4096, 0);
	uint64_t t0;

	OK(ioctl(eng, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	for (i = 0; i < 256; i++)
		OK(nt_compute(fd, i % 8, NT_OP_ADD, 1, d, NULL, NULL));
	CHECK(nt_compute(fd, 0, NT_OP_ADD, 1, d, NULL, NULL) == -EBUSY);
	CHECK(nt_dma(fd, 0, h, 0, h, 2048, 16, NULL, NULL) == -EBUSY);
	/* Per file: another file is not held back. */
	OK(nt_compute(other, 1, NT_OP_ADD, 1, 0, NULL, NULL));
	/* The engine goes: its jobs fail, the file may submit again. */
	a.flags = DRM_NEURON_ENGINE_DETACH;
	OK(ioctl(eng, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	OK(nt_bo_wait(fd, d, 10000));
	t0 = nt_now_ns();
	while ((r = nt_dma(fd, 0, h, 0, h, 2048, 16, NULL, NULL)) == -EBUSY &&
	       nt_now_ns() - t0 < 5000000000ull)
		usleep(10000);	/* jobs are freed just after they signal */
	OK(r);
	OK(nt_bo_wait(fd, h, 5000));
}

/* QUERY zero-fills at most a page past its structure. */
NT_TEST(limits_query_size)
{
	int fd = nt_open(0);
	size_t big = 64 * MIB;
	unsigned char *buf = mmap(NULL, big, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct drm_neuron_query q = { .type = DRM_NEURON_QUERY_DEVICE_INFO,
				      .data = (uintptr_t)buf };
	size_t i;

	CHECK(buf != MAP_FAILED);
	q.size = big;
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	q.size = DRM_NEURON_MAX_QUERY_SIZE + 1;
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	memset(buf, 0xff, DRM_NEURON_MAX_QUERY_SIZE);
	q.size = DRM_NEURON_MAX_QUERY_SIZE;
	OK(ioctl(fd, DRM_IOCTL_NEURON_QUERY, &q));
	CHECK(q.size == sizeof(struct drm_neuron_device_info));
	for (i = q.size; i < DRM_NEURON_MAX_QUERY_SIZE; i++)
		CHECK(buf[i] == 0, "byte %zu", i);
	munmap(buf, big);
}

/* Compute jobs of 64 KiB of commands each, held by an engine that waits. */
static void job_memory_child(void *arg)
{
	int eng = nt_open_bare(0), fd, i;
	struct drm_neuron_engine_attach a = { 0 };
	static uint32_t cmd[16384];
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_CORE, .cmd = (uintptr_t)cmd,
		.cmd_size = sizeof(cmd),
	};
	long long before, after;

	OK(ioctl(eng, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
	nt_cgroup_create("nt-jobs", 0);
	nt_cgroup_enter("nt-jobs");
	fd = nt_open(0);
	nt_cgroup_enter(".");	/* what the jobs cost goes to the opener's group */
	before = nt_cgroup_value("nt-jobs", "memory.current");
	for (i = 0; i < 200; i++) {
		s.queue_index = i % 8;
		OK(ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, &s));
	}
	after = nt_cgroup_value("nt-jobs", "memory.current");
	printf("# 200 jobs of 64 KiB commands: opener's group +%lld KiB\n",
	       (after - before) >> 10);
	CHECK(after - before >= 200 * 64 * 1024, "job memory not charged");
}

NT_TEST(limits_job_memory_charged)
{
	int status = nt_in_child(job_memory_child, NULL);

	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child failed");
}
