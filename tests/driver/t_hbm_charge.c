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

#define POP_MIB	112	/* HBM the populate tests back, twice: 7/8 of the device */

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

/*
 * One copy of POP_MIB from a device BO no job wrote (it reads as zero and
 * needs no backing) into a fresh one: the submit backs POP_MIB in one go.
 */
static int big_populate_job(int fd)
{
	uint32_t src = nt_bo(fd, POP_MIB * MIB, DRM_NEURON_BO_DEVICE);
	uint32_t dst = nt_bo(fd, POP_MIB * MIB, DRM_NEURON_BO_DEVICE);

	return nt_dma(fd, 0, src, 0, dst, 0, POP_MIB * MIB, NULL, NULL);
}

static void populate_child(void *arg)
{
	OK(big_populate_job(nt_open(0)));
}

static long long resident(void)
{
	return nt_sysfs(0, "hbm_resident_bytes");
}

/*
 * Starts populate_child and returns once its submit has backed 8 MiB: the
 * rest of the populate is under way. *base: HBM backed before it.
 */
static pid_t populate_start(int fd, long long *base)
{
	uint64_t t0 = nt_now_ns(), size = nt_param(fd, DRM_NEURON_PARAM_HBM_SIZE);
	pid_t pid;

	/* Room for it: an earlier job's BOs go when the job is freed. */
	while (nt_param(fd, DRM_NEURON_PARAM_HBM_USED) + 2 * POP_MIB * MIB > size) {
		CHECK(nt_now_ns() - t0 < 20000000000ull, "no room for the populate");
		usleep(10000);
	}
	*base = resident();
	pid = fork();

	CHECK(pid >= 0);
	if (!pid) {
		populate_child(NULL);
		exit(0);
	}
	while (resident() < *base + 8 * (long long)MIB) {
		CHECK(nt_now_ns() - t0 < 20000000000ull, "the populate did not start");
		usleep(1000);
	}
	return pid;
}

/*
 * SIGKILL during the submit ends it there: no job comes of it, so the BOs
 * are gone with the process. An unkillable populate runs to its end and
 * queues the job, which holds the BOs for the whole copy.
 */
NT_TEST(hbm_populate_killable)
{
	int fd = nt_open(0), status;
	uint64_t used0 = nt_param(fd, DRM_NEURON_PARAM_HBM_USED);
	long long base;
	pid_t pid = populate_start(fd, &base);

	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(nt_param(fd, DRM_NEURON_PARAM_HBM_USED) == used0,
	      "the killed submit went on: its job holds %llu MiB of BOs",
	      (unsigned long long)(nt_param(fd, DRM_NEURON_PARAM_HBM_USED) - used0) >> 20);
	CHECK(resident() == base, "%lld bytes of HBM left backed", resident() - base);
}

/*
 * Another tenant's compute job runs while one tenant backs a lot of HBM:
 * it finishes before the populate does (a device-wide lock held across the
 * populate would make the engine's access to its memory wait for the end).
 */
NT_TEST(hbm_populate_does_not_stall_others)
{
	pid_t e = nt_engine_start(0), pid;
	int fd = nt_open(0), status;
	uint32_t d = nt_bo(fd, 64 * 1024, DRM_NEURON_BO_DEVICE), *p;
	struct nt_sync s = { nt_syncobj(fd), 0 };
	long long base, done;

	pid = populate_start(fd, &base);
	OK(nt_compute(fd, 5, NT_OP_ADD, 3, d, NULL, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
	done = resident() - base;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
	printf("# the compute job was done when %lld of %d MiB were backed\n",
	       done >> 20, POP_MIB);
	CHECK(nt_fence_status(fd, s.handle) == 1);
	p = nt_dev_read(fd, d, 16384);
	CHECK(p[0] == 3 && p[16383] == 3);
	CHECK(done < POP_MIB * (long long)MIB, "the compute job waited for the whole populate");
	nt_engine_stop(e);
}
