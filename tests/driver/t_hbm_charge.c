// SPDX-License-Identifier: GPL-2.0-only
/*
 * Backing HBM with host pages: charged to the memory cgroup of the file's
 * opener, refused with ENOMEM past its limit, given up when the submitter is
 * killed, and done without a device-wide lock that would stall another
 * tenant's engine work. Timings are ratios against a reference measured in
 * the same test.
 */
#include <signal.h>
#include <sys/wait.h>

#include "nt.h"

#define POP_MIB	192	/* HBM the populate tests back: 3/4 of the device */

/* A DMA job writing n MiB of dev from a 1 MiB host BO: backs n MiB at submit. */
static int populate_job(int fd, uint32_t src, uint32_t dev, uint32_t n)
{
	static struct drm_neuron_dma_copy c[DRM_NEURON_MAX_DMA_COPIES];
	struct drm_neuron_submit_bo bos[2] = {
		{ src, DRM_NEURON_BO_ACCESS_READ }, { dev, DRM_NEURON_BO_ACCESS_WRITE },
	};
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_DMA, .bos = (uintptr_t)bos,
		.bo_count = 2, .bo_stride = sizeof(bos[0]),
		.copies = (uintptr_t)c, .copy_count = n, .copy_stride = sizeof(c[0]),
	};
	uint32_t i;

	for (i = 0; i < n; i++)
		c[i] = (struct drm_neuron_dma_copy){ 0, 1, 0, i * MIB, MIB };
	return ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, &s) ? -errno : 0;
}

static int opener_fd;

/* In another cgroup than the opener: submits on the opener's file. */
static void charge_submitter(void *arg)
{
	uint32_t src = nt_bo(opener_fd, MIB, 0);
	uint32_t dev = *(uint32_t *)arg;

	nt_cgroup_create("nt-submitter", 0);
	nt_cgroup_enter("nt-submitter");
	OK(populate_job(opener_fd, src, dev, 32));
	OK(nt_bo_wait(opener_fd, dev, 10000));
}

static void charge_opener(void *arg)
{
	long long before, after, other;
	uint32_t dev;
	int status;

	nt_cgroup_create("nt-opener", 0);
	nt_cgroup_enter("nt-opener");
	opener_fd = nt_open(0);
	dev = nt_bo(opener_fd, 64 * MIB, DRM_NEURON_BO_DEVICE);
	before = nt_cgroup_value("nt-opener", "memory.current");
	status = nt_in_child(charge_submitter, &dev);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "submitter failed");
	after = nt_cgroup_value("nt-opener", "memory.current");
	other = nt_cgroup_value("nt-submitter", "memory.current");
	printf("# opener's group +%lld KiB, submitter's group %lld KiB\n",
	       (after - before) >> 10, other >> 10);
	CHECK(after - before >= 32 * (long long)MIB, "32 MiB of HBM not charged");
	CHECK(other < 8 * (long long)MIB);
}

NT_TEST(hbm_charged_to_opener_memcg)
{
	int status = nt_in_child(charge_opener, NULL);

	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "opener failed");
}

static void over_limit(void *arg)
{
	int fd;
	uint32_t src, dev;

	/* Open in a small group, then leave it: the file's charges stay there. */
	nt_cgroup_create("nt-small", 24 * MIB);
	nt_cgroup_enter("nt-small");
	fd = nt_open(0);
	nt_cgroup_enter(".");
	src = nt_bo(fd, MIB, 0);
	dev = nt_bo(fd, 128 * MIB, DRM_NEURON_BO_DEVICE);
	CHECK(populate_job(fd, src, dev, 64) == -ENOMEM, "64 MiB of HBM past a 24 MiB limit");
	nt_close_bo(fd, dev);	/* its pages go back */
	dev = nt_bo(fd, 128 * MIB, DRM_NEURON_BO_DEVICE);
	CHECK(nt_compute(fd, 0, NT_OP_ADD, 1, dev, NULL, NULL) == -ENOMEM);
	nt_close_bo(fd, dev);
	dev = nt_bo(fd, 8 * MIB, DRM_NEURON_BO_DEVICE);
	OK(populate_job(fd, src, dev, 4));	/* what fits still works */
	OK(nt_bo_wait(fd, dev, 10000));
}

/* Past the opener's limit: ENOMEM for the submit, no OOM kill. */
NT_TEST(hbm_memcg_limit_enomem)
{
	int status = nt_in_child(over_limit, NULL);
	const char *ev;

	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child failed (status %#x)",
	      status);
	ev = nt_read_file(NT_CGROUP "/nt-small/memory.events");
	CHECK(strstr(ev, "oom_kill 0"), "memory.events: %s", ev);
}

/* Submits a job backing POP_MIB of a fresh BO; tells the parent when. */
static void populate_child(void *arg)
{
	int *pipe_w = arg, fd = nt_open(0);
	uint32_t src = nt_bo(fd, MIB, 0);
	uint32_t dev = nt_bo(fd, POP_MIB * MIB, DRM_NEURON_BO_DEVICE);

	CHECK(write(*pipe_w, "g", 1) == 1);
	OK(populate_job(fd, src, dev, POP_MIB));
}

/* Starts populate_child; returns its pid once it is about to submit. */
static pid_t populate_start(void)
{
	int p[2];
	char c;
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	if (!pid) {
		populate_child(&p[1]);
		exit(0);
	}
	CHECK(read(p[0], &c, 1) == 1);
	close(p[0]);
	close(p[1]);
	return pid;
}

/* How long backing POP_MIB takes here: the submit of populate_child. */
static uint64_t populate_reference_ns(void)
{
	int fd = nt_open(0);
	uint32_t src = nt_bo(fd, MIB, 0);
	uint32_t dev = nt_bo(fd, POP_MIB * MIB, DRM_NEURON_BO_DEVICE);
	uint64_t t0 = nt_now_ns(), dt;

	OK(populate_job(fd, src, dev, POP_MIB));
	dt = nt_now_ns() - t0;
	OK(nt_bo_wait(fd, dev, 20000));
	close(fd);
	printf("# backing %d MiB of HBM took %llu ms\n", POP_MIB,
	       (unsigned long long)dt / 1000000);
	return dt;
}

/* SIGKILL during the submit ends it at once, not after the whole populate. */
NT_TEST(hbm_populate_killable)
{
	uint64_t full = populate_reference_ns(), t0, dt;
	pid_t pid = populate_start();
	int status;

	usleep(full / 8000);
	t0 = nt_now_ns();
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
	dt = nt_now_ns() - t0;
	printf("# killed after 1/8 of it: gone in %llu ms\n",
	       (unsigned long long)dt / 1000000);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(dt < full / 2, "kill took %llu of %llu ms", (unsigned long long)dt / 1000000,
	      (unsigned long long)full / 1000000);
}

/* Another tenant's engine work goes on while one tenant backs a lot of HBM. */
NT_TEST(hbm_populate_does_not_stall_others)
{
	uint64_t full = populate_reference_ns(), t0, dt;
	pid_t e = nt_engine_start(0), pid;
	int fd = nt_open(0), status;
	uint32_t d = nt_bo(fd, 64 * 1024, DRM_NEURON_BO_DEVICE), *p;
	struct nt_sync s = { nt_syncobj(fd), 0 };

	pid = populate_start();
	usleep(full / 8000);
	t0 = nt_now_ns();
	OK(nt_compute(fd, 5, NT_OP_ADD, 3, d, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
	dt = nt_now_ns() - t0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
	printf("# compute job during the populate: %llu ms\n",
	       (unsigned long long)dt / 1000000);
	CHECK(nt_fence_status(fd, s.handle) == 1);
	p = nt_dev_read(fd, d, 16384);
	CHECK(p[0] == 3 && p[16383] == 3);
	CHECK(dt < full / 2, "compute job took %llu ms of a %llu ms populate",
	      (unsigned long long)dt / 1000000, (unsigned long long)full / 1000000);
	nt_engine_stop(e);
}
