// SPDX-License-Identifier: GPL-2.0-only
/*
 * The test engine: a child process that attaches as the device's compute
 * engine, maps HBM and executes a tiny command set (nt.h, NT_OP_*), one job
 * at a time, fetching from every core.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "nt.h"

/* Durations the ops take, capped: the fuzzer submits arbitrary ones. */
#define NT_ENGINE_MS(ms) ((ms) < 10000 ? (ms) : 10000)

/* Run for @ms, reporting progress every 50 ms: -ENOENT once timed out. */
static int nt_engine_progress(int fd, uint64_t job, uint32_t ms)
{
	struct drm_neuron_engine_complete p = {
		.job_id = job, .flags = DRM_NEURON_ENGINE_PROGRESS,
	};
	uint64_t end = nt_now_ns() + ms * 1000000ull;

	while (nt_now_ns() < end) {
		usleep(50000);
		if (ioctl(fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &p))
			return -errno;
	}
	return 0;
}

/* bo 0 is a device BO inside the aperture (the kernel backed it whole). */
static int nt_engine_bo0(const struct drm_neuron_engine_fetch *f,
			 const struct drm_neuron_engine_bo *bos, uint64_t hbm_size)
{
	return f->bo_count >= 1 && (bos[0].bo_flags & DRM_NEURON_BO_DEVICE) &&
	       bos[0].device_addr + bos[0].size <= hbm_size;
}

static void nt_engine_loop(int fd, uint8_t *hbm, uint64_t hbm_size)
{
	static uint32_t cmd[65536 / 4];
	static struct drm_neuron_engine_bo bos[DRM_NEURON_MAX_SUBMIT_BOS];

	for (;;) {
		struct drm_neuron_engine_fetch f = {
			.timeout_ns = nt_deadline_ms(1000),
			.cmd = (uintptr_t)cmd, .cmd_size = sizeof(cmd),
			.bos = (uintptr_t)bos, .bo_count = DRM_NEURON_MAX_SUBMIT_BOS,
			.bo_stride = sizeof(bos[0]),
		};
		struct drm_neuron_engine_complete c = { 0 };

		if (ioctl(fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f)) {
			if (errno == ETIME || errno == EINTR)
				continue;
			nt_fail(__FILE__, __LINE__, "engine fetch: %s", strerror(errno));
		}
		c.job_id = f.job_id;
		switch (cmd[0]) {
		case NT_OP_ADD:
			if (!nt_engine_bo0(&f, bos, hbm_size)) {
				c.status = -EINVAL;
				break;
			}
			for (uint64_t i = 0; i < bos[0].size / 4; i++)
				((uint32_t *)(hbm + bos[0].device_addr))[i] += cmd[1];
			break;
		case NT_OP_HANG:
			continue;
		case NT_OP_FAIL:
			c.status = -EIO;
			break;
		case NT_OP_SLEEP:
			usleep(NT_ENGINE_MS(cmd[1]) * 1000);
			break;
		case NT_OP_PROGRESS:
			if (nt_engine_progress(fd, f.job_id, NT_ENGINE_MS(cmd[1])))
				continue;	/* timed out meanwhile: drop it */
			break;
		case NT_OP_SLOW_FILL:
			usleep(NT_ENGINE_MS(cmd[1]) * 1000);
			if (nt_engine_bo0(&f, bos, hbm_size))
				memset(hbm + bos[0].device_addr, 0xa5, bos[0].size);
			break;
		default:
			c.status = -EOPNOTSUPP;
		}
		if (ioctl(fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c) && errno != ENOENT)
			nt_fail(__FILE__, __LINE__, "engine complete: %s", strerror(errno));
	}
}

pid_t nt_engine_start(int minor)
{
	int p[2];
	char c;
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	if (!pid) {
		struct drm_neuron_engine_attach a = { 0 };
		uint8_t *hbm;
		int fd;

		/* A test that fails takes its engine with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		fd = nt_open_bare(minor);
		OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &a));
		hbm = mmap(NULL, a.hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			   fd, a.hbm_mmap_offset);
		CHECK(hbm != MAP_FAILED, "engine mmap: %s", strerror(errno));
		CHECK(write(p[1], "r", 1) == 1);
		close(p[1]);
		nt_engine_loop(fd, hbm, a.hbm_size);
	}
	close(p[1]);	/* a child that dies before "r": end of file */
	CHECK(read(p[0], &c, 1) == 1, "engine did not start");
	close(p[0]);
	return pid;
}

void nt_engine_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

