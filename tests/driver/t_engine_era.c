// SPDX-License-Identifier: GPL-2.0-only
/*
 * A compute job belongs to the engine it was submitted for. When that engine
 * detaches (neurond dies: its engine file closes), every job of its era that
 * did not complete fails with ENODEV: fetched, waiting to be fetched, and
 * still queued in the scheduler behind a fence. A new engine (the restarted
 * neurond) never gets one of them: it knows nothing of the commands they
 * carry, and running one would run a tenant's command twice or out of order.
 */
#include <sys/mman.h>

#include "nt.h"

static struct drm_neuron_engine_attach era_hbm;	/* of the last attach */
static uint64_t era_addr;	/* bo 0's device address in the last fetch */

static int era_attach(void)
{
	int fd = nt_open(0);

	era_hbm = (struct drm_neuron_engine_attach){ 0 };
	OK(ioctl(fd, DRM_IOCTL_NEURON_ENGINE_ATTACH, &era_hbm));
	return fd;
}

/* Fetch one job of @mask within @ms: 0 with its id and cmd[0], or -errno. */
static int era_fetch(int fd, uint64_t mask, int ms, uint64_t *id, uint32_t *op)
{
	uint32_t cmd[16];
	struct drm_neuron_engine_bo bos[4];
	struct drm_neuron_engine_fetch f = {
		.timeout_ns = nt_deadline_ms(ms), .core_mask = mask,
		.cmd = (uintptr_t)cmd, .cmd_size = sizeof(cmd),
		.bos = (uintptr_t)bos, .bo_count = 4, .bo_stride = sizeof(bos[0]),
	};

	if (ioctl(fd, DRM_IOCTL_NEURON_ENGINE_FETCH, &f))
		return -errno;
	*id = f.job_id;
	*op = cmd[0];
	era_addr = bos[0].device_addr;
	return 0;
}

static int era_complete(int fd, uint64_t id)
{
	struct drm_neuron_engine_complete c = { .job_id = id };

	return ioctl(fd, DRM_IOCTL_NEURON_ENGINE_COMPLETE, &c);
}

NT_TEST(engine_detach_fails_its_jobs_not_the_next_engines)
{
	int fd = nt_open(0), e1 = era_attach(), e2;
	uint32_t dev = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE), *p, *w, op, i;
	uint8_t *hbm;
	uint32_t src = nt_bo(fd, 8 * MIB, 0), dst = nt_bo(fd, 8 * MIB, 0);
	struct nt_sync fetched = { nt_syncobj(fd), 0 };
	struct nt_sync pending = { nt_syncobj(fd), 0 };
	struct nt_sync behind = { nt_syncobj(fd), 0 };
	struct nt_sync slow = { nt_syncobj(fd), 0 };
	struct nt_sync waiting = { nt_syncobj(fd), 0 };
	struct nt_sync later = { nt_syncobj(fd), 0 };
	uint64_t id;

	nt_dev_fill(fd, dev, 1024);
	/* Core 0: one job the engine fetches, one queued behind it. */
	OK(nt_compute(fd, 0, NT_OP_ADD, 1, dev, NULL, &fetched));
	OK(nt_compute(fd, 0, NT_OP_ADD, 2, dev, NULL, &behind));
	/* Core 1: one job the engine never fetches. */
	OK(nt_compute(fd, 1, NT_OP_ADD, 4, dev, NULL, &pending));
	/* Core 2: one job waiting for a DMA job still running at the detach. */
	OK(nt_dma_repeat(fd, src, dst, 6, 8 * MIB, &slow));
	OK(nt_compute(fd, 2, NT_OP_ADD, 8, dev, &slow, &waiting));
	OK(era_fetch(e1, 1, 5000, &id, &op));
	CHECK(op == NT_OP_ADD);

	/* The engine goes (as a dying neurond's does), the next one comes. */
	close(e1);
	e2 = era_attach();
	/* Those the old engine held fail at once. */
	OK(nt_syncobj_wait(fd, fetched.handle, 0, 2000));
	CHECK(nt_fence_status(fd, fetched.handle) == -ENODEV, "fetched: %d",
	      nt_fence_status(fd, fetched.handle));
	OK(nt_syncobj_wait(fd, pending.handle, 0, 2000));
	CHECK(nt_fence_status(fd, pending.handle) == -ENODEV, "pending: %d",
	      nt_fence_status(fd, pending.handle));
	/* The queued ones reach the scheduler now, and fail: none comes here. */
	CHECK(era_fetch(e2, 0, 1000, &id, &op) == -ETIME,
	      "a job of the old era reached the new engine");
	OK(nt_syncobj_wait(fd, behind.handle, 0, 5000));
	CHECK(nt_fence_status(fd, behind.handle) == -ENODEV, "behind: %d",
	      nt_fence_status(fd, behind.handle));
	OK(nt_syncobj_wait(fd, slow.handle, 0, 20000));
	CHECK(nt_fence_status(fd, slow.handle) == 1, "dma: %d",
	      nt_fence_status(fd, slow.handle));
	OK(nt_syncobj_wait(fd, waiting.handle, 0, 5000));
	CHECK(nt_fence_status(fd, waiting.handle) == -ENODEV, "waiting: %d",
	      nt_fence_status(fd, waiting.handle));
	CHECK(era_fetch(e2, 0, 200, &id, &op) == -ETIME, "a job of the old era reached the new engine");
	/* None of them ran: the memory is as the fill left it. */
	p = nt_dev_read(fd, dev, 1024);
	for (i = 0; i < 1024; i++)
		CHECK(p[i] == i, "word %u = %u", i, p[i]);

	/*
	 * Jobs submitted for the new engine run on it, on the file's memory as
	 * it was: the file outlived the engine, its BOs with it.
	 */
	OK(nt_compute(fd, 0, NT_OP_ADD, 1, dev, NULL, &later));
	OK(era_fetch(e2, 0, 5000, &id, &op));
	CHECK(op == NT_OP_ADD);
	hbm = mmap(NULL, era_hbm.hbm_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   e2, era_hbm.hbm_mmap_offset);
	CHECK(hbm != MAP_FAILED, "mmap: %s", strerror(errno));
	w = (uint32_t *)(hbm + era_addr);
	for (i = 0; i < 1024; i++) {
		CHECK(w[i] == i, "engine sees word %u = %u", i, w[i]);
		w[i] += 1;
	}
	OK(era_complete(e2, id));
	OK(nt_syncobj_wait(fd, later.handle, 0, 5000));
	CHECK(nt_fence_status(fd, later.handle) == 1);
	p = nt_dev_read(fd, dev, 1024);
	for (i = 0; i < 1024; i++)
		CHECK(p[i] == i + 1, "word %u = %u", i, p[i]);
	munmap(hbm, era_hbm.hbm_size);
	close(e2);
}

/* Jobs submitted while no engine is attached still run on the next one. */
NT_TEST(engine_jobs_before_attach_run_on_it)
{
	int fd = nt_open(0), e1 = era_attach(), e2;
	uint32_t dev = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE), op;
	uint32_t src = nt_bo(fd, 8 * MIB, 0), dst = nt_bo(fd, 8 * MIB, 0);
	struct nt_sync slow = { nt_syncobj(fd), 0 };
	struct nt_sync s = { nt_syncobj(fd), 0 };
	uint64_t id;

	close(e1);	/* an era ends with nothing in it */
	OK(nt_dma_repeat(fd, src, dst, 6, 8 * MIB, &slow));
	OK(nt_compute(fd, 3, NT_OP_ADD, 1, dev, &slow, &s));
	e2 = era_attach();
	OK(era_fetch(e2, 0, 20000, &id, &op));
	OK(era_complete(e2, id));
	OK(nt_syncobj_wait(fd, s.handle, 0, 5000));
	CHECK(nt_fence_status(fd, s.handle) == 1);
	close(e2);
}
