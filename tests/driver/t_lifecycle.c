// SPDX-License-Identifier: GPL-2.0-only
/*
 * Module life cycle, run by guest-init.sh between loads: x_* tests run only
 * when named on the command line.
 */
#include <sys/mman.h>

#include "nt.h"

static int module_loaded(void)
{
	return strstr(nt_read_file("/proc/modules"), "neuron ") != NULL;
}

/* rmmod is refused while a file, a mapping or a dma-buf is alive. */
NT_TEST(x_unload_refused_while_in_use)
{
	int fd = nt_open(0);
	uint32_t h = nt_bo(fd, 4096, 0), *p = nt_map(fd, h, 4096);
	struct drm_prime_handle ph = { .handle = h, .flags = DRM_CLOEXEC };

	OK(ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph));
	p[0] = 7;
	CHECK(system("rmmod neuron 2>/dev/null") != 0, "rmmod with an open file");
	close(fd);
	CHECK(system("rmmod neuron 2>/dev/null") != 0, "rmmod with a mapping");
	CHECK(p[0] == 7);
	munmap(p, 4096);
	CHECK(system("rmmod neuron 2>/dev/null") != 0, "rmmod with a dma-buf");
	CHECK(module_loaded());
	close(ph.fd);
	CHECK(system("rmmod neuron") == 0, "rmmod once all is closed");
	CHECK(!module_loaded());
}

/* A bit of everything, for the load/unload cycles. */
NT_TEST(x_cycle_work)
{
	int fd = nt_open(0), fd1 = nt_open(1);
	uint32_t src = nt_bo(fd, MIB, 0), dst = nt_bo(fd, MIB, 0);
	uint32_t dev = nt_bo(fd, MIB, DRM_NEURON_BO_DEVICE);
	uint8_t *ps = nt_map(fd, src, MIB), *pd = nt_map(fd, dst, MIB);
	struct nt_sync t1 = { nt_syncobj(fd), 1 }, t2 = { t1.handle, 2 };

	memset(ps, 0x3c, MIB);
	OK(nt_dma(fd, 0, src, 0, dev, 0, MIB, NULL, &t1));
	OK(nt_dma(fd, 1, dev, 0, dst, 0, MIB, &t1, &t2));
	OK(nt_compute(fd, 0, NT_OP_ADD, 1, dev, NULL, NULL));	/* no engine */
	OK(nt_syncobj_wait(fd, t1.handle, 2, 5000));
	CHECK(pd[0] == 0x3c && pd[MIB - 1] == 0x3c);
	nt_bo(fd1, 2 * MIB, DRM_NEURON_BO_DEVICE);
	/* Leave a job in flight at close: teardown must wait for it. */
	OK(nt_dma(fd, 0, src, 0, dev, 0, MIB, NULL, NULL));
}

/* Loaded with job_timeout_ms=10: a 1 GiB DMA job overruns, like compute. */
NT_TEST(x_dma_timeout)
{
	int fd = nt_open(0), other = nt_open(0);
	uint32_t src = nt_bo(fd, 8 * MIB, 0), dst = nt_bo(fd, 8 * MIB, 0);
	uint32_t h = nt_bo(other, 4096, 0);
	struct nt_sync s = { nt_syncobj(fd), 0 };
	struct drm_neuron_reset_status r = { 0 };
	long long resets = nt_sysfs(0, "resets");

	OK(nt_dma_repeat(fd, src, dst, 128, 8 * MIB, &s));
	OK(nt_syncobj_wait(fd, s.handle, 0, 20000));
	CHECK(nt_fence_status(fd, s.handle) == -ETIMEDOUT, "status %d",
	      nt_fence_status(fd, s.handle));
	OK(ioctl(fd, DRM_IOCTL_NEURON_GET_RESET_STATUS, &r));
	CHECK(r.status == DRM_NEURON_CONTEXT_BANNED && r.guilty_jobs == 1);
	CHECK(nt_sysfs(0, "resets") == resets + 1);
	CHECK(nt_dma_repeat(fd, src, dst, 1, 8 * MIB, NULL) == -ECANCELED);
	/* Another file's small job is fine. */
	OK(nt_dma(other, 0, h, 0, h, 2048, 16, NULL, NULL));
	OK(nt_bo_wait(other, h, 5000));
}

/*
 * rmmod with a DMA job running (its file closed): the job stops at its next
 * chunk, and every job is gone before the schedulers are (no warning, no
 * leak; the suite checks the log). A 1 GiB job runs for a good part of a
 * second even on a host core; here the module has a minute's timeout.
 */
NT_TEST(x_rmmod_during_long_dma)
{
	int fd = nt_open(0);
	uint32_t src = nt_bo(fd, 8 * MIB, 0), dst = nt_bo(fd, 8 * MIB, 0);
	uint64_t t0;

	OK(nt_dma_repeat(fd, src, dst, 128, 8 * MIB, NULL));
	close(fd);	/* the job keeps running: it holds its BOs */
	t0 = nt_now_ns();
	CHECK(system("rmmod neuron") == 0, "rmmod with a DMA job running");
	printf("# rmmod during a 1 GiB DMA job: %llu ms\n",
	       (unsigned long long)(nt_now_ns() - t0) / 1000000);
	CHECK(!module_loaded());
	CHECK(system("dmesg | grep -q 'dma0: job 1 .*stopped: device going away'") == 0,
	      "the running job was not stopped");
}
